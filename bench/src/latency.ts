import { deriveKey, fingerprint } from "@once/core";
import type { BenchContext } from "./bench-context.js";
import { median, percentile, ratio, round } from "./stats.js";
import { INPUT, TOOL_NAME } from "./workload.js";

export interface LatencyFigures {
  concurrency: number;
  claimP50Ms: number;
  claimP99Ms: number;
  setNxP50Ms: number;
  setNxP99Ms: number;
  /** claimP99Ms / setNxP99Ms. */
  p99Ratio: number;
  samplesPerKind: number;
}

/**
 * A claim (RedisStore.claim of a fresh key, as a worker makes it) against a plain `SET key value PX NX` on
 * the same connection, alternating within every loop so both kinds see the same load. Percentiles per
 * round, medians over the rounds.
 */
export async function compareClaimLatency(
  ctx: BenchContext,
  settings: { concurrency: number; rounds: number; roundMs: number },
): Promise<LatencyFigures> {
  const build = ctx.builds[0];
  if (!build) throw new Error("no build");
  const redis = ctx.target.connect();
  const prefix = `${ctx.prefix}lat${settings.concurrency}:`;
  const store = await build.RedisStore.create({ redis: redis as never, prefix, checks: false });
  const token = "1.0123456789abcdef";
  const print = fingerprint(TOOL_NAME, INPUT);
  let serial = 0;
  const round1 = async (durationMs: number) => {
    const claims: number[] = [];
    const sets: number[] = [];
    const deadline = performance.now() + durationMs;
    const loop = async (offset: number) => {
      for (let i = offset; performance.now() < deadline; i++) {
        const n = serial++;
        // Half the loops start with a claim, half with a SET, so neither kind always goes first.
        if (i % 2 === 0) {
          // The key and fingerprint are the caller's work, made before the clock starts: this times the store.
          const request = {
            key: deriveKey({ namespace: "bench", taskId: prefix, stepId: String(n) }),
            fingerprint: print,
            tool: TOOL_NAME,
            phase: "effect" as const,
            leaseMs: 30_000,
          };
          const started = performance.now();
          const claim = await store.claim(request);
          claims.push(performance.now() - started);
          if (claim.outcome !== "acquired") throw new Error(`latency: ${claim.outcome}`);
        } else {
          const started = performance.now();
          await redis.set(`${prefix}nx:${n}`, token, "PX", 30_000, "NX");
          sets.push(performance.now() - started);
        }
      }
    };
    await Promise.all(Array.from({ length: settings.concurrency }, (_, c) => loop(c % 2)));
    return { claims, sets };
  };
  try {
    await round1(Math.min(300, settings.roundMs));
    const rounds: { claims: number[]; sets: number[] }[] = [];
    for (let r = 0; r < settings.rounds; r++) rounds.push(await round1(settings.roundMs));
    const claimP50 = median(rounds.map((r) => percentile(r.claims, 50)));
    const claimP99 = median(rounds.map((r) => percentile(r.claims, 99)));
    const setP50 = median(rounds.map((r) => percentile(r.sets, 50)));
    const setP99 = median(rounds.map((r) => percentile(r.sets, 99)));
    return {
      concurrency: settings.concurrency,
      claimP50Ms: round(claimP50),
      claimP99Ms: round(claimP99),
      setNxP50Ms: round(setP50),
      setNxP99Ms: round(setP99),
      p99Ratio: round(ratio(claimP99, setP99)),
      samplesPerKind: Math.min(...rounds.map((r) => Math.min(r.claims.length, r.sets.length))),
    };
  } finally {
    await redis.quit();
  }
}
