import type { Redis } from "ioredis";
import { withUsage } from "./usage.js";

/**
 * Runs every side once per round, rotating which side goes first, so slow drift on a noisy machine (other
 * people's tests, a warming JIT, a filling Redis) lands on every side alike. Returns each side's results in
 * round order.
 */
export async function interleave<S extends string, R>(
  sides: readonly S[],
  rounds: number,
  run: (side: S, round: number) => Promise<R>,
): Promise<Record<S, R[]>> {
  const results = Object.fromEntries(sides.map((side) => [side, [] as R[]])) as Record<S, R[]>;
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < sides.length; i++) {
      const side = sides[(round + i) % sides.length] as S;
      results[side].push(await run(side, round));
    }
  }
  return results;
}

/** What one timed run of an operation cost. */
export interface OpsFigures {
  opsPerSec: number;
  /** CPU time per operation of this Node process and of the Redis server, in µs. */
  nodeCpuUs: number;
  redisCpuUs: number;
}

/**
 * Runs `concurrency` loops of `op` until `durationMs` has passed. CPU per operation is the steadier figure on
 * a busy machine: a starved process runs slower, but an operation costs about the same CPU.
 */
export async function measureOps(
  probe: Redis,
  concurrency: number,
  durationMs: number,
  op: (n: number) => Promise<unknown>,
): Promise<OpsFigures> {
  let started = 0;
  let finished = 0;
  const { usage } = await withUsage(probe, async () => {
    const deadline = performance.now() + durationMs;
    const loop = async () => {
      while (performance.now() < deadline) {
        await op(started++);
        finished++;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, loop));
  });
  const perOp = (share: number) => (share * usage.seconds * 1e6) / Math.max(1, finished);
  return {
    opsPerSec: finished / usage.seconds,
    nodeCpuUs: perOp(usage.nodeCpu),
    redisCpuUs: perOp(usage.redisCpu),
  };
}
