import { describe, expect, it } from "vitest";
import { jobRetryTerms, jobRetryWindow } from "../src/index.js";

describe("BullMQ's retry-window terms", () => {
  it("sums backoff, attempts, dispatcher retries and the resume gap", () => {
    const window = jobRetryWindow({
      attempts: 4,
      backoff: { type: "exponential", delay: 1_000 },
      leaseMs: 10_000,
      lockDurationMs: 30_000,
      stalledIntervalMs: 30_000,
      dispatcher: { retries: 2, timeoutMs: 5_000, backoffMs: 500 },
      resumeGapMs: 60_000,
    });
    // backoff 1+2+4 s; attempts 4 × (30 + 30) s; dispatcher 2 × 5.5 s; gap 60 s.
    expect(window.terms.map((t) => t.ms)).toEqual([7_000, 240_000, 11_000, 60_000]);
    expect(window.worstCaseMs).toBe(318_000);
    expect(window.leaseMs).toBe(10_000);
  });

  it("says which of BullMQ's settings it assumed", () => {
    const [, attempts] = jobRetryTerms({ attempts: 3, backoff: 2_000 })({ ms: 5_000 });
    expect(attempts).toMatchObject({ name: "attempts", ms: 3 * 60_000 });
    expect(attempts?.detail).toContain("lease 5000 (the worker's)");
    expect(attempts?.detail).toContain("lockDuration 30000 (BullMQ's default, assumed)");
    expect(attempts?.detail).toContain("stalledInterval 30000 (BullMQ's default, assumed)");
  });
});
