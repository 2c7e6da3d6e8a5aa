// What every @once/mastra test file stands on: a store on the shared Redis under a prefix of its own, and the
// payments stand-in (a real HTTP server) — set up before the file's tests and torn down after them. The
// bindings are live: import them, and call `useAgentWorld` once at the top of the file.

import { type PaymentsServer, startPaymentsServer } from "@once/payments";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";

export let store: RedisStore;
export let payments: PaymentsServer;
export let prefix: string;

export function useAgentWorld(label: string, latencyMs = 5): void {
  let redis: Redis;
  prefix = randomPrefix(label);
  beforeAll(async () => {
    redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    store = await RedisStore.create({ redis, prefix });
    payments = await startPaymentsServer({ latency: latencyMs === 0 ? "none" : { fixedMs: latencyMs } });
  });
  afterAll(async () => {
    await payments.close();
    await cleanupPrefix(redis, prefix);
    redis.disconnect();
  });
}
