import * as vitest from "vitest";
import { MemoryStore } from "../src/memory-store.js";
import { DEFAULT_RETENTION_MS } from "../src/store.js";
import { describeStoreConformance } from "../src/testing.js";

// The reference implementation runs the same suite as every other store; it needs no Redis.
describeStoreConformance(
  vitest,
  "MemoryStore",
  async ({ retentionMs = DEFAULT_RETENTION_MS, keepTaskIdentity }) => ({
    store: new MemoryStore({ retentionMs, ...(keepTaskIdentity === undefined ? {} : { keepTaskIdentity }) }),
    retentionMs,
    teardown: async () => {},
  }),
);
