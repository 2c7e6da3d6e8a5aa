import { describe, expect, it } from "vitest";
import { decodeClaim, decodeWrite, OUTCOME_CODES } from "../src/internal.js";
import { deriveKey } from "../src/key.js";
import { MemoryStore } from "../src/memory-store.js";
import { isLivenessStore, isTaskStore, type OnceStore } from "../src/store.js";
import {
  ownerNonce,
  ownerToken,
  positiveInteger,
  retryAfterFor,
  withTimeout,
  wrapStore,
} from "../src/store-kit.js";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** What a store's `malformed` does: throw its own error, here one that says it was called. */
const malformed = (): never => {
  throw new Error("malformed");
};

describe("ownerToken", () => {
  it("is <fence>.<16 hex chars>, a fresh nonce every time", () => {
    const tokens = Array.from({ length: 2_000 }, () => ownerToken(7));
    for (const token of tokens) expect(token).toMatch(/^7\.[0-9a-f]{16}$/);
    expect(new Set(tokens).size).toBe(tokens.length);
    expect(ownerNonce()).toMatch(/^[0-9a-f]{16}$/);
  });
});

describe("withTimeout", () => {
  it("settles like the promise when it answers in time", async () => {
    await expect(withTimeout(Promise.resolve(42), 1_000, "Redis")).resolves.toBe(42);
    await expect(withTimeout(Promise.reject(new Error("refused")), 1_000, "Redis")).rejects.toThrow(
      "refused",
    );
  });

  it("rejects naming the server once the timeout passes, not before", async () => {
    const started = performance.now();
    await expect(withTimeout(new Promise(() => {}), 100, "PostgreSQL")).rejects.toThrow(
      "PostgreSQL did not answer within 100 ms",
    );
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(99);
    // The sweep runs every tenth of the timeout; the rest is room for a busy machine's timers.
    expect(waited).toBeLessThan(1_000);
  });

  it("fails a short call on time while a long one waits", async () => {
    const long = withTimeout(
      sleep(300).then(() => "long"),
      5_000,
      "Redis",
    );
    await expect(withTimeout(new Promise(() => {}), 50, "Redis")).rejects.toThrow("within 50 ms");
    await expect(long).resolves.toBe("long");
  });
});

describe("positiveInteger", () => {
  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53])(
    "refuses %s, naming the setting",
    (v) => {
      expect(() => positiveInteger("leaseMs", v)).toThrow(RangeError);
      expect(() => positiveInteger("leaseMs", v)).toThrow(`leaseMs must be a positive integer, got ${v}`);
    },
  );

  it("accepts a positive integer", () => {
    expect(() => positiveInteger("leaseMs", 1)).not.toThrow();
  });
});

describe("retryAfterFor", () => {
  it("is the owner's lease left, between 50 ms and 5 s", () => {
    expect([retryAfterFor(-10), retryAfterFor(10), retryAfterFor(1_234), retryAfterFor(60_000)]).toEqual([
      50, 50, 1_234, 5_000,
    ]);
  });
});

describe("decodeClaim and decodeWrite", () => {
  it("read every code, integers as numbers or decimal strings", () => {
    const ownership = { fence: "3", token: "3.abc", leaseUntil: 1_000, claims: "4" };
    expect(decodeClaim({ code: OUTCOME_CODES.acquired, ...ownership }, malformed)).toEqual({
      outcome: "acquired",
      token: "3.abc",
      fence: 3,
      leaseUntil: 1_000,
      claims: 4,
    });
    expect(
      decodeClaim({ code: OUTCOME_CODES.reconcile, ...ownership, detail: "unknown" }, malformed),
    ).toEqual({
      outcome: "reconcile",
      from: "unknown",
      token: "3.abc",
      fence: 3,
      leaseUntil: 1_000,
      claims: 4,
    });
    expect(
      decodeClaim({ code: OUTCOME_CODES.replay, fence: 2, result: '{"a":1}', trace: "t" }, malformed),
    ).toEqual({ outcome: "replay", result: '{"a":1}', fence: 2, trace: "t" });
    expect(decodeClaim({ code: OUTCOME_CODES.replay_error, fence: 2 }, malformed)).toEqual({
      outcome: "replay_error",
      error: { name: "Error", message: "failed" },
      fence: 2,
    });
    expect(
      decodeClaim(
        { code: OUTCOME_CODES.in_flight, fence: 1, detail: "claimed", remaining: "60000" },
        malformed,
      ),
    ).toEqual({ outcome: "in_flight", retryAfterMs: 5_000, state: "claimed", fence: 1 });
    expect(decodeClaim({ code: OUTCOME_CODES.conflict, detail: "charge" }, malformed)).toEqual({
      outcome: "conflict",
      tool: "charge",
    });
    expect(decodeWrite({ code: OUTCOME_CODES.ok, fence: "2", leaseUntil: null }, malformed)).toEqual({
      outcome: "ok",
      fence: 2,
    });
    expect(decodeWrite({ code: OUTCOME_CODES.ok, fence: 2, leaseUntil: "9" }, malformed)).toEqual({
      outcome: "ok",
      fence: 2,
      leaseUntil: 9,
    });
    expect(decodeWrite({ code: OUTCOME_CODES.lost }, malformed)).toEqual({ outcome: "lost" });
    expect(decodeWrite({ code: OUTCOME_CODES.refused, detail: "state is done" }, malformed)).toEqual({
      outcome: "refused",
      reason: "state is done",
    });
  });

  it.each([
    ["an unknown code", { code: 99 }],
    ["a write code for a claim", { code: OUTCOME_CODES.ok, fence: 1 }],
    ["a missing token", { code: OUTCOME_CODES.acquired, fence: 1, leaseUntil: 1, claims: 1 }],
    ["a fence that is not an integer", { code: OUTCOME_CODES.replay, fence: "1.5", result: "1" }],
    [
      "a reconcile from no state",
      { code: OUTCOME_CODES.reconcile, fence: 1, token: "1.a", leaseUntil: 1, claims: 1 },
    ],
    [
      "an in_flight state that is not an owner's",
      { code: OUTCOME_CODES.in_flight, fence: 1, detail: "done", remaining: 1 },
    ],
  ])("hands %s to the store's malformed", (_, reply) => {
    expect(() => decodeClaim(reply, malformed)).toThrow("malformed");
  });

  it("hands a claim code given for a write to the store's malformed", () => {
    expect(() => decodeWrite({ code: OUTCOME_CODES.acquired }, malformed)).toThrow("malformed");
    expect(() => decodeWrite({ code: OUTCOME_CODES.ok }, malformed)).toThrow("malformed");
  });
});

describe("wrapStore", () => {
  const claimOf = (stepId: string) => ({
    key: deriveKey({ taskId: "wrapped", stepId }),
    tool: "charge",
    fingerprint: "f".repeat(64),
    leaseMs: 1_000,
    phase: "effect" as const,
  });

  it("replaces the methods given and keeps every other capability of the store, bound to it", async () => {
    const store = new MemoryStore({ retentionMs: 5_000 });
    const claimed: string[] = [];
    const wrapped: OnceStore = wrapStore(store, {
      claim: (request) => {
        claimed.push(request.key);
        return store.claim(request);
      },
    });
    // A wrapper of OnceStore's methods alone would answer false to both: once would run without them.
    expect(isLivenessStore(wrapped)).toBe(true);
    expect(isTaskStore(wrapped)).toBe(true);
    expect(wrapped.retentionMs).toBe(5_000);
    const request = claimOf("charge");
    expect((await wrapped.claim(request)).outcome).toBe("acquired");
    expect(claimed).toEqual([request.key]);
    // Not overridden: the store's own, so it sees what the override's claim wrote.
    expect((await wrapped.get(request.key))?.state).toBe("claimed");
  });

  it("hides a method whose override is undefined", () => {
    const hidden = wrapStore(new MemoryStore(), { readTask: undefined });
    expect("readTask" in hidden).toBe(false);
    expect(isTaskStore(hidden)).toBe(false);
    expect(isLivenessStore(hidden)).toBe(true);
  });
});
