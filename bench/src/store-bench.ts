import { createClient } from "@redis/client";
import type { BenchContext } from "./bench-context.js";
import { interleave, measureOps, type OpsFigures } from "./interleave.js";
import { median } from "./stats.js";
import {
  naiveContender,
  onceContender,
  powertoolsContender,
  type StepPayload,
  type StoreContender,
} from "./store-contenders.js";
import { INPUT } from "./workload.js";

export interface StoreComparison {
  concurrency: number;
  resultBytes: number;
  /** Median operations per second over the rounds, by contender name. */
  cyclesPerSec: Record<string, number>;
  replaysPerSec: Record<string, number>;
  /** Median CPU per operation, by contender: this Node process and the Redis server, µs. */
  cycleCpu: Record<string, { nodeUs: number; redisUs: number }>;
  replayCpu: Record<string, { nodeUs: number; redisUs: number }>;
  /** Each round's ops/s, by contender, in round order (the sides of one round ran back to back). */
  cycleRounds: Record<string, number[]>;
  replayRounds: Record<string, number[]>;
}

const REPLAY_POOL = 1_000;
let comparisons = 0;

/**
 * claim+complete cycles and replays of every contender, each against its own connection to the same Redis,
 * with the same payload and result, sides interleaved round by round; medians over the rounds.
 */
export async function compareStores(
  ctx: BenchContext,
  settings: {
    concurrency: number;
    result: unknown;
    rounds: number;
    roundMs: number;
    /** Add Powertools with its in-process LRU (`useLocalCache`). */
    localCache?: boolean;
    /** Add once on a client with ioredis' `enableAutoPipelining`. */
    autoPipelining?: boolean;
  },
): Promise<StoreComparison> {
  const { concurrency, result, rounds, roundMs } = settings;
  const tag = `${ctx.prefix}s${comparisons++}:`;
  const ioredisClients = ctx.builds.map(() => ctx.target.connect());
  const naiveClient = ctx.target.connect();
  const pipelinedClient = settings.autoPipelining ? ctx.target.connect({ autoPipelining: true }) : undefined;
  const nodeRedis = await createClient({ url: `redis://${ctx.target.host}:${ctx.target.port}` }).connect();
  const localCacheClient = settings.localCache
    ? await createClient({ url: `redis://${ctx.target.host}:${ctx.target.port}` }).connect()
    : undefined;
  try {
    const contenders: StoreContender[] = [];
    for (const [i, build] of ctx.builds.entries()) {
      const store = await build.RedisStore.create({
        redis: ioredisClients[i] as never,
        prefix: `${tag}${i}:`,
        checks: false,
      });
      contenders.push(onceContender(build.label, store, result));
    }
    if (pipelinedClient) {
      const store = await ctx.builds[0]?.RedisStore.create({
        redis: pipelinedClient as never,
        prefix: `${tag}ap:`,
        checks: false,
      });
      if (store) contenders.push(onceContender("once+autopipelining", store, result));
    }
    contenders.push(powertoolsContender("powertools", nodeRedis, `${tag}pt`, result));
    if (localCacheClient) {
      contenders.push(powertoolsContender("powertools+lru", localCacheClient, `${tag}ptl`, result, true));
    }
    contenders.push(naiveContender("naive", naiveClient, `${tag}nv:`, result));
    const names = contenders.map((c) => c.name);
    const byName = new Map(contenders.map((c) => [c.name, c]));
    const payload = (side: string, round: number | string, n: number): StepPayload => ({
      taskId: `${tag}${side}`,
      stepId: `${round}-${n}`,
      input: INPUT,
    });

    // Warm every path (JIT, script cache) before anything is timed.
    for (const contender of contenders) {
      await measureOps(ctx.probe, concurrency, Math.min(200, roundMs), (n) =>
        contender.cycle(payload(contender.name, "warm", n)),
      );
    }
    const cycles = await interleave(names, rounds, (name, round) => {
      const contender = byName.get(name) as StoreContender;
      return measureOps(ctx.probe, concurrency, roundMs, (n) => contender.cycle(payload(name, round, n)));
    });

    const pools = new Map<string, StepPayload[]>();
    for (const contender of contenders) {
      const pool = Array.from({ length: REPLAY_POOL }, (_, n) => payload(contender.name, "done", n));
      for (let i = 0; i < pool.length; i += 100) {
        await Promise.all(pool.slice(i, i + 100).map((p) => contender.cycle(p)));
      }
      pools.set(contender.name, pool);
      await measureOps(ctx.probe, concurrency, Math.min(200, roundMs), (n) =>
        contender.replay(pool[n % pool.length] as StepPayload),
      );
    }
    const replays = await interleave(names, rounds, (name) => {
      const contender = byName.get(name) as StoreContender;
      const pool = pools.get(name) as StepPayload[];
      return measureOps(ctx.probe, concurrency, roundMs, (n) =>
        contender.replay(pool[n % pool.length] as StepPayload),
      );
    });

    const ops = (list: OpsFigures[] = []) => list.map((f) => f.opsPerSec);
    const cpu = (list: OpsFigures[] = []) => ({
      nodeUs: median(list.map((f) => f.nodeCpuUs)),
      redisUs: median(list.map((f) => f.redisCpuUs)),
    });
    return {
      concurrency,
      resultBytes: JSON.stringify(result).length,
      cyclesPerSec: Object.fromEntries(names.map((n) => [n, median(ops(cycles[n]))])),
      replaysPerSec: Object.fromEntries(names.map((n) => [n, median(ops(replays[n]))])),
      cycleCpu: Object.fromEntries(names.map((n) => [n, cpu(cycles[n])])),
      replayCpu: Object.fromEntries(names.map((n) => [n, cpu(replays[n])])),
      cycleRounds: Object.fromEntries(names.map((n) => [n, ops(cycles[n])])),
      replayRounds: Object.fromEntries(names.map((n) => [n, ops(replays[n])])),
    };
  } finally {
    await Promise.all(
      [...ioredisClients, naiveClient, ...(pipelinedClient ? [pipelinedClient] : [])].map((c) => c.quit()),
    );
    await nodeRedis.close();
    await localCacheClient?.close();
  }
}
