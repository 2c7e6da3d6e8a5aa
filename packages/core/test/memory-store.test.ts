import { describeStoreConformance } from "../../../test/support/store-conformance.js";
import { MemoryStore } from "../src/memory-store.js";
import { DEFAULT_RETENTION_MS } from "../src/store.js";

// The reference implementation runs the same suite as every other store; it needs no Redis.
describeStoreConformance("MemoryStore", async ({ retentionMs = DEFAULT_RETENTION_MS }) => ({
  store: new MemoryStore({ retentionMs }),
  retentionMs,
  teardown: async () => {},
}));
