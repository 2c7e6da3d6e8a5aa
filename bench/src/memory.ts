import { deriveKey, deriveTaskKey } from "@once/core";
import { createClient } from "@redis/client";
import type { Redis } from "ioredis";
import type { BenchContext } from "./bench-context.js";
import { infoField } from "./server-stats.js";
import { median, round } from "./stats.js";
import { naiveContender, powertoolsContender } from "./store-contenders.js";
import { INPUT, resultOfSize, settleKeys } from "./workload.js";

export interface MemoryFigures {
  resultBytes: number;
  /** Median MEMORY USAGE of a done record (the hash, its key, its expiry), with a traceparent on it. */
  bytesPerRecord: number;
  /** The same without a traceparent (a worker without a tracing SDK stores none). */
  untracedBytesPerRecord: number;
  /**
   * Traced, and claimed naming its task (a 16-character task id, a 16-character step id, the namespace `bench`):
   * the record keeps that identity, as every record of the engine's entry points does when the store keeps them.
   */
  taskBytesPerRecord: number;
  /**
   * MEMORY USAGE of the task's entry over the calls filed in it (those of `taskBytesPerRecord`): what a call of a
   * task costs beside its record (a field naming its key, and the order of its filing).
   */
  taskEntryBytesPerCall: number;
  encoding: string;
  recordsMeasured: number;
  /** used_memory growth over `recordsMeasured` records, per record: adds the keyspace's own overhead. */
  usedMemoryPerRecord: number;
  /** usedMemoryPerRecord × 1,000,000. */
  bytesFor1M: number;
  /** MEMORY USAGE of the same result stored by the others, for comparison. */
  powertoolsBytesPerRecord: number;
  naiveBytesPerRecord: number;
  /** MEMORY USAGE of a done record by result size. */
  byResultSize: Record<string, number>;
}

// A traced worker stores its span's traceparent on the record: count it in.
const TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const SAMPLE = 1_000;
// A task id of 16 characters, as the records of a task in the memory figure name it.
const TASK_ID = "task-0123456789a";

/** Fills `records` done records (100-byte results) and reads what they cost. */
export async function measureMemory(ctx: BenchContext, records: number): Promise<MemoryFigures> {
  const build = ctx.builds[0];
  if (!build) throw new Error("no build");
  const redis = ctx.target.connect();
  const nodeRedis = await createClient({ url: `redis://${ctx.target.host}:${ctx.target.port}` }).connect();
  try {
    const fill = async (
      prefix: string,
      count: number,
      bytes: number,
      trace = TRACE,
      withTask = false,
    ): Promise<string[]> => {
      const store = await build.RedisStore.create({ redis: redis as never, prefix, checks: false });
      const text = JSON.stringify(resultOfSize(bytes));
      const taskOf = (i: number) => ({
        namespace: "bench",
        taskId: TASK_ID,
        stepId: `step-${String(i).padStart(11, "0")}`,
      });
      const keys = Array.from({ length: count }, (_, i) =>
        withTask
          ? deriveKey(taskOf(i))
          : deriveKey({ namespace: "bench", taskId: prefix, stepId: String(i) }),
      );
      await settleKeys(store, keys, text, {
        batch: 500,
        ...(trace === "" ? {} : { trace }),
        ...(withTask ? { taskOf } : {}),
      });
      return keys.map((key) => prefix + key);
    };
    const usage = async (keys: readonly string[]) =>
      median(
        await Promise.all(
          keys
            .filter((_, i) => i % Math.max(1, Math.floor(keys.length / SAMPLE)) === 0)
            .map(async (key) => Number(await redis.memory("USAGE", key, "SAMPLES", 0))),
        ),
      );

    const before = Number(await infoField(ctx.probe, "memory", "used_memory"));
    const keys = await fill(`${ctx.prefix}mem:`, records, 100);
    const after = Number(await infoField(ctx.probe, "memory", "used_memory"));
    const usedMemoryPerRecord = (after - before) / records;
    const encoding = String(await redis.object("ENCODING", keys[0] as string));
    const bytesPerRecord = await usage(keys);
    await unlinkAll(redis, keys);

    const byResultSize: Record<string, number> = {};
    for (const bytes of [100, 1024, 65_536]) {
      const sized = await fill(`${ctx.prefix}mem${bytes}:`, 200, bytes);
      byResultSize[String(bytes)] = await usage(sized);
      await unlinkAll(redis, sized);
    }

    const untraced = await fill(`${ctx.prefix}memnt:`, 1_000, 100, "");
    const untracedBytesPerRecord = await usage(untraced);
    await unlinkAll(redis, untraced);

    const tasked = await fill(`${ctx.prefix}memtk:`, 1_000, 100, TRACE, true);
    const taskBytesPerRecord = await usage(tasked);
    await unlinkAll(redis, tasked);
    // The task's entry (one field per filed call) is the task's, not a record's: counted on its own.
    const entry = `${ctx.prefix}memtk:task:${deriveTaskKey({ namespace: "bench", taskId: TASK_ID })}`;
    const taskEntryBytesPerCall = round(
      Number(await redis.memory("USAGE", entry, "SAMPLES", 0)) / tasked.length,
    );
    await redis.unlink(entry);

    const result = resultOfSize(100);
    const fillOthers = async (contender: ReturnType<typeof naiveContender>, taskId: string) => {
      for (let i = 0; i < 200; i += 50) {
        await Promise.all(
          Array.from({ length: 50 }, (_, j) =>
            contender.cycle({ taskId, stepId: String(i + j), input: INPUT }),
          ),
        );
      }
    };
    const naivePrefix = `${ctx.prefix}memnv:`;
    await fillOthers(naiveContender("naive", redis, naivePrefix, result), "t");
    const naiveBytesPerRecord = await usage(await keysMatching(redis, `${naivePrefix}*`));
    const ptPrefix = `${ctx.prefix}mempt`;
    await fillOthers(powertoolsContender("powertools", nodeRedis, ptPrefix, result), "t");
    const powertoolsBytesPerRecord = await usage(await keysMatching(redis, `${ptPrefix}#*`));

    return {
      resultBytes: 100,
      bytesPerRecord,
      untracedBytesPerRecord,
      taskBytesPerRecord,
      taskEntryBytesPerCall,
      encoding,
      recordsMeasured: records,
      usedMemoryPerRecord: round(usedMemoryPerRecord),
      bytesFor1M: Math.round(usedMemoryPerRecord * 1_000_000),
      powertoolsBytesPerRecord,
      naiveBytesPerRecord,
      byResultSize,
    };
  } finally {
    await redis.quit();
    await nodeRedis.close();
  }
}

async function keysMatching(redis: Redis, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = "0";
  do {
    const [next, found] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 10_000);
    cursor = next;
    keys.push(...found);
  } while (cursor !== "0");
  return keys;
}

async function unlinkAll(redis: Redis, keys: readonly string[]): Promise<void> {
  for (let i = 0; i < keys.length; i += 1_000) await redis.unlink(...keys.slice(i, i + 1_000));
}
