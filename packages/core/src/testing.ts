/**
 * `@once/core/testing`: the OnceStore conformance suite, for a store's own tests. A store that passes it behaves
 * like MemoryStore, the reference, in every transition and claim outcome of docs/protocol.md.
 */

export {
  type Assertion,
  describeStoreConformance,
  type StoreFixture,
  type StoreSetup,
  type StoreSetupOptions,
  type TestApi,
} from "./store-conformance.js";
