import { defineTool } from "@once/core";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  assertRetryWindow,
  inProcessTerms,
  longestLease,
  RetryWindowError,
  resumeGapTerm,
  retryWindow,
} from "../src/index.js";

const effect = (name: string, leaseMs?: number) =>
  defineTool({
    name,
    kind: "effect",
    input: z.object({}),
    output: z.object({}),
    ...(leaseMs === undefined ? {} : { leaseMs }),
    run: () => ({}),
  });

describe("retry window", () => {
  it("sums its terms", () => {
    const window = retryWindow([
      { name: "a", ms: 1_000, detail: "" },
      { name: "b", ms: 2_500, detail: "" },
      resumeGapTerm(60_000),
    ]);
    expect(window.worstCaseMs).toBe(63_500);
    expect(window.terms.map((t) => t.name)).toEqual(["a", "b", "resumeGap"]);
  });

  it("refuses a retention shorter than the window, printing every term", () => {
    const terms = [...inProcessTerms(3, 100, 5_000)({ ms: 6_000 }), resumeGapTerm(1_500)];
    expect(() => assertRetryWindow(1_000, terms)).toThrow(RetryWindowError);
    try {
      assertRetryWindow(1_000, terms);
    } catch (err) {
      const message = (err as Error).message;
      for (const term of ["backoff: 300 ms", "attempts: 18000 ms", "resumeGap: 1500 ms", "lease 6000"])
        expect(message).toContain(term);
    }
    expect(assertRetryWindow(24 * 3600_000, terms).worstCaseMs).toBe(19_800);
  });

  it("caps the in-process backoff, so many attempts still make a finite window", () => {
    const [backoff, attempts] = inProcessTerms(50, 10, 5_000)({ ms: 1_000 });
    // 10, 20, … 2560 ms (9 pauses), then 40 pauses of 5 s.
    expect(backoff?.ms).toBe(5_110 + 40 * 5_000);
    expect(attempts?.ms).toBe(50_000);
  });

  it("counts the longest lease of the effect tools, and says whose it is", () => {
    expect(longestLease([effect("a"), effect("b", 45_000)], 30_000)).toEqual({ ms: 45_000, tool: "b" });
    expect(longestLease([effect("a"), effect("b", 10_000)], 30_000)).toEqual({ ms: 30_000 });
    expect(longestLease([], 20_000)).toEqual({ ms: 20_000 });
  });
});
