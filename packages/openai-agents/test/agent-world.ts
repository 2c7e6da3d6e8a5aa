// What every @once/openai-agents test file stands on: a store on the shared Redis under a prefix of its own,
// and the payments stand-in (a real HTTP server) — set up before the file's tests and torn down after them.
// The SDK's tracing is off, so nothing tries to export to OpenAI. The bindings are live: import them, and
// call `useAgentWorld` once at the top of the file.

import { type PaymentsServer, startPaymentsServer } from "@once/payments";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import { setTracingDisabled } from "@openai/agents";
import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";

export let store: RedisStore;
export let payments: PaymentsServer;
export let prefix: string;

export function useAgentWorld(label: string): void {
  let redis: Redis;
  prefix = randomPrefix(label);
  setTracingDisabled(true);
  beforeAll(async () => {
    redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    store = await RedisStore.create({ redis, prefix });
    payments = await startPaymentsServer({ latency: { fixedMs: 5 } });
  });
  afterAll(async () => {
    await payments.close();
    await cleanupPrefix(redis, prefix);
    redis.disconnect();
  });
}
