import { deriveKey } from "@once/core";
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
  encoding: string;
  recordsMeasured: number;
  /** used_memory growth over `recordsMeasured` records, per record: adds the keyspace's own overhead. */
  usedMemoryPerRecord: number;
  /** usedMemoryPerRecord × 1,000,000. */
  bytesFor1M: number;
  /** MEMORY USAGE of the same result stored by the others, for comparison. */
  powertoolsBytesPerRecord: number;
  naiveBytesPerRecord: number;
  /** MEMORY USAGE with `hash-max-listpack-value 1024` (dedicated server only). */
  listpackBytesPerRecord?: number;
  /** MEMORY USAGE of a done record by result size. */
  byResultSize: Record<string, number>;
}

// A traced worker stores its span's traceparent on the record: count it in.
const TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const SAMPLE = 1_000;

/** Fills `records` done records (100-byte results) and reads what they cost. */
export async function measureMemory(ctx: BenchContext, records: number): Promise<MemoryFigures> {
  const build = ctx.builds[0];
  if (!build) throw new Error("no build");
  const redis = ctx.target.connect();
  const nodeRedis = await createClient({ url: `redis://${ctx.target.host}:${ctx.target.port}` }).connect();
  try {
    const fill = async (prefix: string, count: number, bytes: number, trace = TRACE): Promise<string[]> => {
      const store = await build.RedisStore.create({ redis: redis as never, prefix, checks: false });
      const text = JSON.stringify(resultOfSize(bytes));
      const keys = Array.from({ length: count }, (_, i) =>
        deriveKey({ namespace: "bench", taskId: prefix, stepId: String(i) }),
      );
      await settleKeys(store, keys, text, { batch: 500, ...(trace === "" ? {} : { trace }) });
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

    let listpackBytesPerRecord: number | undefined;
    if (ctx.target.dedicated) {
      const [, previous] = (await redis.config("GET", "hash-max-listpack-value")) as [string, string];
      await redis.config("SET", "hash-max-listpack-value", "1024");
      try {
        const packed = await fill(`${ctx.prefix}memlp:`, 1_000, 100);
        listpackBytesPerRecord = await usage(packed);
        await unlinkAll(redis, packed);
      } finally {
        await redis.config("SET", "hash-max-listpack-value", previous);
      }
    }

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
      encoding,
      recordsMeasured: records,
      usedMemoryPerRecord: round(usedMemoryPerRecord),
      bytesFor1M: Math.round(usedMemoryPerRecord * 1_000_000),
      powertoolsBytesPerRecord,
      naiveBytesPerRecord,
      ...(listpackBytesPerRecord === undefined ? {} : { listpackBytesPerRecord }),
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
