import type { OnceStore } from "@once/core";
import { RedisStore } from "@once/redis";
import type { Redis } from "ioredis";
import { CountingStore } from "./counting-store.js";
import type { KeyLayout } from "./key-layout.js";
import { RedisCounters } from "./redis-counters.js";

export interface OrderStoreOptions {
  redis: Redis;
  layout: KeyLayout;
  retentionMs?: number;
  /** Count claim outcomes in the layout's `stats` hash (see CountingStore). */
  countOutcomes?: boolean;
}

/** The order agent's dedup store, shared by its worker and its orchestrator: a RedisStore, counted if asked. */
export async function openOrderStore(options: OrderStoreOptions): Promise<OnceStore> {
  const { redis, layout } = options;
  const store = await RedisStore.create({
    redis,
    prefix: layout.store,
    ...(options.retentionMs === undefined ? {} : { retentionMs: options.retentionMs }),
  });
  return options.countOutcomes ? CountingStore.wrap(store, new RedisCounters(redis, layout.stats)) : store;
}
