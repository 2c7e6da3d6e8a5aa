import { describe, expect, it } from "vitest";
import { createLatencySampler } from "../src/index.js";

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

function draw(sample: () => number, count: number): number[] {
  return Array.from({ length: count }, sample).sort((a, b) => a - b);
}

describe("createLatencySampler", () => {
  // The sampler is tested directly: asserting on the server's wall-clock timing would be flaky by design.
  it.each([1, 7, 42])("fits p50 ≈ 50 ms and p99 ≈ 2 s by default (seed %i)", (seed) => {
    const samples = draw(createLatencySampler(undefined, seed), 20_000);
    // Bounds are several standard errors wide for 20,000 draws of this log-normal.
    expect(quantile(samples, 0.5)).toBeGreaterThanOrEqual(45);
    expect(quantile(samples, 0.5)).toBeLessThanOrEqual(55);
    expect(quantile(samples, 0.99)).toBeGreaterThanOrEqual(1700);
    expect(quantile(samples, 0.99)).toBeLessThanOrEqual(2350);
  });

  it("is heavy-tailed: the mean sits well above the median", () => {
    const samples = draw(createLatencySampler({ p50Ms: 50, p99Ms: 2000 }, 3), 20_000);
    const mean = samples.reduce((sum, ms) => sum + ms, 0) / samples.length;
    expect(mean).toBeGreaterThan(2 * quantile(samples, 0.5));
  });

  it("follows other configured quantiles and caps the tail at maxMs", () => {
    const samples = draw(createLatencySampler({ p50Ms: 10, p99Ms: 100, maxMs: 150 }, 5), 20_000);
    expect(quantile(samples, 0.5)).toBeGreaterThanOrEqual(9);
    expect(quantile(samples, 0.5)).toBeLessThanOrEqual(11);
    expect(quantile(samples, 0.99)).toBeGreaterThanOrEqual(85);
    expect(quantile(samples, 0.99)).toBeLessThanOrEqual(118);
    expect(samples.at(-1)).toBeLessThanOrEqual(150);
  });

  it("repeats the same sequence for the same seed, and another for another seed", () => {
    const first = Array.from({ length: 50 }, createLatencySampler(undefined, 7));
    const again = Array.from({ length: 50 }, createLatencySampler(undefined, 7));
    const other = Array.from({ length: 50 }, createLatencySampler(undefined, 8));
    expect(again).toEqual(first);
    expect(other).not.toEqual(first);
  });

  it("supports a fixed latency and none", () => {
    expect(draw(createLatencySampler({ fixedMs: 25 }), 10)).toEqual(Array(10).fill(25));
    expect(draw(createLatencySampler("none"), 10)).toEqual(Array(10).fill(0));
  });

  it("rejects quantiles that cannot describe a distribution", () => {
    expect(() => createLatencySampler({ p50Ms: 100, p99Ms: 50 })).toThrow(RangeError);
    expect(() => createLatencySampler({ p50Ms: 0, p99Ms: 50 })).toThrow(RangeError);
    expect(() => createLatencySampler({ fixedMs: -1 })).toThrow(RangeError);
  });
});
