import { RedisStore } from "@once/redis";
import { type RedisServerHandle, startRedisServer } from "@once/support";
import { Redis } from "ioredis";
import type { BenchContext } from "./bench-context.js";
import { interleave } from "./interleave.js";
import { median, percentile, round } from "./stats.js";

/**
 * What confirming transitions on replicas costs: claim + complete cycles on a primary with two replicas of its
 * own (every server on this machine, so a replica's acknowledgement is a loopback hop), without `WAIT`, and
 * with `durability.replicas` 1 and 2. Sides interleave by round; percentiles per round, medians over rounds.
 */
export interface DurabilityFigures {
  concurrency: number;
  sides: Record<DurabilitySide, DurabilitySideFigures>;
}

interface DurabilitySideFigures {
  cyclesPerSec: number;
  claimP50Ms: number;
  claimP99Ms: number;
  completeP50Ms: number;
  completeP99Ms: number;
}

const SIDES = ["no WAIT", "WAIT 1 replica", "WAIT 2 replicas"] as const;
type DurabilitySide = (typeof SIDES)[number];
const REPLICAS: Record<DurabilitySide, number> = { "no WAIT": 0, "WAIT 1 replica": 1, "WAIT 2 replicas": 2 };

export async function compareDurability(
  ctx: BenchContext,
  settings: { concurrency: number[]; rounds: number; roundMs: number },
): Promise<DurabilityFigures[]> {
  // Like the primary the bench spawns: no persistence, so the figures are replication's, not the disk's.
  const primary = await startRedisServer({
    bin: ctx.options.redisServerBin,
    extraArgs: ["--loglevel", "warning"],
  });
  const replicas: RedisServerHandle[] = [];
  const redis = new Redis(primary.url);
  try {
    for (let i = 0; i < 2; i++) {
      replicas.push(
        await startRedisServer({
          bin: ctx.options.redisServerBin,
          extraArgs: ["--loglevel", "warning", "--replicaof", "127.0.0.1", String(primary.port)],
        }),
      );
    }
    await replicasOnline(redis, 2);
    const stores = Object.fromEntries(
      await Promise.all(
        SIDES.map(async (side) => {
          const replicas = REPLICAS[side];
          const store = await RedisStore.create({
            redis,
            prefix: `${ctx.prefix}durable${replicas}:`,
            checks: false,
            ...(replicas === 0 ? {} : { durability: { replicas, timeoutMs: 1_000 } }),
          });
          return [side, store] as const;
        }),
      ),
    ) as Record<DurabilitySide, RedisStore>;
    const figures: DurabilityFigures[] = [];
    for (const concurrency of settings.concurrency) {
      ctx.log(
        `durability: claim + complete at concurrency ${concurrency}, without WAIT and with 1 and 2 replicas`,
      );
      let serial = 0;
      const rounds = await interleave(SIDES, settings.rounds, (side) =>
        cycles(stores[side], concurrency, settings.roundMs, () => `c${concurrency}-${serial++}`),
      );
      const sides = Object.fromEntries(
        SIDES.map((side) => {
          const of = (pick: (r: Round) => number) => round(median(rounds[side].map(pick)));
          return [
            side,
            {
              cyclesPerSec: of((r) => r.cyclesPerSec),
              claimP50Ms: of((r) => percentile(r.claims, 50)),
              claimP99Ms: of((r) => percentile(r.claims, 99)),
              completeP50Ms: of((r) => percentile(r.completes, 50)),
              completeP99Ms: of((r) => percentile(r.completes, 99)),
            },
          ];
        }),
      ) as DurabilityFigures["sides"];
      figures.push({ concurrency, sides });
    }
    return figures;
  } finally {
    redis.disconnect();
    for (const replica of replicas) await replica.stop();
    await primary.stop();
  }
}

interface Round {
  cyclesPerSec: number;
  claims: number[];
  completes: number[];
}

async function cycles(store: RedisStore, concurrency: number, durationMs: number, nextKey: () => string) {
  const claims: number[] = [];
  const completes: number[] = [];
  const started = performance.now();
  const deadline = started + durationMs;
  const loop = async () => {
    while (performance.now() < deadline) {
      const key = nextKey();
      const t0 = performance.now();
      const claim = await store.claim({ key, fingerprint: "f", tool: "t", phase: "effect", leaseMs: 30_000 });
      const t1 = performance.now();
      if (claim.outcome !== "acquired") throw new Error(`durability bench: ${claim.outcome}`);
      await store.complete(key, claim.token, '{"ok":true}');
      claims.push(t1 - t0);
      completes.push(performance.now() - t1);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return { cyclesPerSec: claims.length / ((performance.now() - started) / 1000), claims, completes };
}

async function replicasOnline(redis: Redis, count: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const info = await redis.info("replication");
    if ((info.match(/state=online/g) ?? []).length >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the bench's ${count} replicas did not come online within 10 s`);
}
