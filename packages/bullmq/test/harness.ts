import type { AnyTool } from "@once/core";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import { Queue, QueueEvents } from "bullmq";
import { Redis } from "ioredis";
import { Dispatcher, type DispatcherOptions, OnceWorker, type OnceWorkerOptions } from "../src/index.js";

/** A real queue, a RedisStore, an in-process OnceWorker, and a dispatcher factory, on their own prefixes. */
export interface Harness {
  redis: Redis;
  store: RedisStore;
  queue: Queue;
  queueName: string;
  events: QueueEvents;
  worker: OnceWorker;
  dispatcher(options?: Partial<DispatcherOptions>): Promise<Dispatcher>;
  close(): Promise<void>;
}

export async function startHarness(
  tools: AnyTool[],
  workerOptions: Partial<OnceWorkerOptions> = {},
): Promise<Harness> {
  const redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  const workerRedis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  const prefix = randomPrefix("bullmq");
  const queueName = `q-${Math.random().toString(16).slice(2, 10)}`;
  const store = await RedisStore.create({ redis, prefix });
  const queue = new Queue(queueName, { connection: redis });
  const events = new QueueEvents(queueName, { connection: redis.duplicate() });
  const worker = await OnceWorker.create({
    queueName,
    connection: workerRedis,
    store,
    tools,
    concurrency: 4,
    workerOptions: { lockDuration: 5_000, stalledInterval: 5_000 },
    ...workerOptions,
  });
  await events.waitUntilReady();
  const dispatchers: Dispatcher[] = [];
  return {
    redis,
    store,
    queue,
    queueName,
    events,
    worker,
    async dispatcher(options = {}) {
      const d = await Dispatcher.create({ queue, store, tools, timeoutMs: 5_000, retries: 0, ...options });
      dispatchers.push(d);
      return d;
    },
    async close() {
      await Promise.all(dispatchers.map((d) => d.close()));
      await worker.close(true);
      await events.close();
      await events.disconnect();
      await queue.obliterate({ force: true });
      await queue.close();
      await cleanupPrefix(redis, prefix);
      redis.disconnect();
      workerRedis.disconnect();
    },
  };
}
