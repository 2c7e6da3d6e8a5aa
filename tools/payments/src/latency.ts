import { randomInt } from "node:crypto";

/**
 * How long the provider takes to answer an effect request.
 * `{ p50Ms, p99Ms }` is a log-normal fitted to those two quantiles; `maxMs` caps the tail (default 10 × p99)
 * so one freak draw cannot stall a test run for minutes.
 */
export type LatencyConfig = { p50Ms: number; p99Ms: number; maxMs?: number } | { fixedMs: number } | "none";

/** Real providers are mostly quick and occasionally very slow; the slow tail is what outlives client timeouts. */
export const DEFAULT_LATENCY: LatencyConfig = { p50Ms: 50, p99Ms: 2000 };

/** The 0.99 quantile of the standard normal distribution. */
const Z_99 = 2.3263478740408408;

/** Returns a function drawing one latency in whole milliseconds; the same seed gives the same sequence. */
export function createLatencySampler(
  latency: LatencyConfig = DEFAULT_LATENCY,
  seed: number = randomInt(2 ** 32),
): () => number {
  if (latency === "none") return () => 0;
  if ("fixedMs" in latency) {
    const { fixedMs } = latency;
    if (!Number.isFinite(fixedMs) || fixedMs < 0)
      throw new RangeError(`fixedMs must be >= 0, got ${fixedMs}`);
    return () => fixedMs;
  }
  const { p50Ms, p99Ms, maxMs = p99Ms * 10 } = latency;
  if (!(p50Ms > 0 && p99Ms >= p50Ms && maxMs > 0)) {
    throw new RangeError(`latency needs 0 < p50Ms <= p99Ms and maxMs > 0, got ${JSON.stringify(latency)}`);
  }
  // ln(latency) ~ Normal(mu, sigma): the median is e^mu, and the p99 is e^(mu + Z_99 * sigma).
  const mu = Math.log(p50Ms);
  const sigma = Math.log(p99Ms / p50Ms) / Z_99;
  const random = mulberry32(seed);
  return function sampleLatencyMs() {
    return Math.min(maxMs, Math.round(Math.exp(mu + sigma * standardNormal(random))));
  };
}

/** Box–Muller; `1 - random()` keeps the logarithm away from zero. */
function standardNormal(random: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
}

/** A small, well-known 32-bit PRNG: Math.random cannot be seeded, and runs must be reproducible. */
function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
