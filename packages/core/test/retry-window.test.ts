import { describe, expect, it } from "vitest";
import { assertRetryWindow, RetryWindowError, retryWindow } from "../src/index.js";

describe("retry window", () => {
  it("sums backoff, attempts, dispatcher retries and the resume gap", () => {
    const window = retryWindow({
      retentionMs: 0,
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
  });

  it("refuses a retention shorter than the window, printing every term", () => {
    const input = { retentionMs: 1_000, attempts: 3, backoff: 2_000, leaseMs: 5_000 };
    expect(() => assertRetryWindow(input)).toThrow(RetryWindowError);
    try {
      assertRetryWindow(input);
    } catch (err) {
      const message = (err as Error).message;
      for (const term of ["backoff: 4000 ms", "attempts: 180000 ms", "resumeGap: 0 ms"])
        expect(message).toContain(term);
    }
    expect(assertRetryWindow({ ...input, retentionMs: 24 * 3600_000 }).worstCaseMs).toBe(184_000);
  });
});
