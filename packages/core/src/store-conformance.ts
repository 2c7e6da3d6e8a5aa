// The one conformance suite every OnceStore runs: each transition of the record's state machine and each
// claim outcome of docs/protocol.md, against a real store. MemoryStore is the reference; a store that passes
// this suite behaves like it.
//
// It takes the test runner's functions as an argument instead of importing one: @once/core depends on no test
// runner, and the suite runs under whichever one the store's own tests use (see the README's store kit).

import { randomBytes } from "node:crypto";
import { APPROVAL_EXPIRED_ERROR, deniedError } from "./approval.js";
import type { StoredError } from "./errors.js";
import { deriveKey } from "./key.js";
import {
  type ApprovalStore,
  type CancelOutcome,
  type ClaimOutcome,
  type ClaimRequest,
  type DecisionRequest,
  isApprovalStore,
  isLivenessStore,
  isTaskStore,
  type LivenessStore,
  type OnceRecord,
  type OnceStore,
  type Ownership,
  type TaskIdentity,
  type TaskStore,
  type WriteOutcome,
} from "./store.js";

/** The matchers the suite uses: a subset of Jest's `expect` API, which vitest's `expect` has. */
export interface Assertion {
  readonly not: Assertion;
  toBe(expected: unknown): void;
  toEqual(expected: unknown): void;
  toMatchObject(expected: object): void;
  toMatch(expected: RegExp): void;
  toBeUndefined(): void;
  toBeGreaterThan(expected: number): void;
  toBeGreaterThanOrEqual(expected: number): void;
  toBeLessThan(expected: number): void;
  toBeLessThanOrEqual(expected: number): void;
  toHaveLength(expected: number): void;
  toContain(expected: unknown): void;
}

/**
 * The test runner's functions the suite is written with, in Jest's API: `import * as vitest from "vitest"`
 * gives them (the runner the suite is tested with).
 */
export interface TestApi {
  describe(name: string, body: () => void): void;
  it(name: string, body: () => Promise<void>): void;
  beforeEach(hook: () => Promise<void>): void;
  afterEach(hook: () => Promise<void>): void;
  expect(actual: unknown): Assertion;
}

/** A store under test, the retention it was built with, and how to clean up after it. */
export interface StoreFixture {
  store: OnceStore;
  retentionMs: number;
  teardown(): Promise<void>;
}

export interface StoreSetupOptions {
  /** Build the store with this retention instead of its usual one (the retention tests use a short one). */
  retentionMs?: number;
  /** Build the store with this `keepTaskIdentity` (StoreOptions) instead of the default (true). */
  keepTaskIdentity?: boolean;
}

/** Builds a fresh store in its own key space; called once per test. */
export type StoreSetup = (options: StoreSetupOptions) => Promise<StoreFixture>;

// Short leases keep the suite fast; every wait is the lease plus a margin, never a tight race.
const LEASE_MS = 200;
const MARGIN_MS = 120;
const LONG_LEASE_MS = 10_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A key shaped like deriveKey's (64 hex chars), unique to the test. */
function randomKey(): string {
  return randomBytes(32).toString("hex");
}

function request(key: string, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    key,
    fingerprint: "fp-0123",
    tool: "charge_card",
    phase: "prepare",
    leaseMs: LONG_LEASE_MS,
    trace: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    ...overrides,
  };
}

/** The record without `ttlMs`, which moves on by itself: what "unchanged" compares. */
function frozen(record: OnceRecord | undefined): Omit<OnceRecord, "ttlMs"> | undefined {
  if (record === undefined) return undefined;
  const { ttlMs: _ttl, ...rest } = record;
  return rest;
}

type Owned = Extract<ClaimOutcome, { token: string }>;

const declined: StoredError = { name: "CardDeclinedError", message: "card declined", code: "card_declined" };
const timeout: StoredError = { name: "SocketTimeoutError", message: "socket timed out after the request" };

/**
 * Runs the conformance suite against the store `setup` builds, with the runner's functions `test`:
 * `describeStoreConformance(vitest, "MyStore", setup)` after `import * as vitest from "vitest"`.
 */
export function describeStoreConformance(test: TestApi, name: string, setup: StoreSetup): void {
  const { describe, it, beforeEach, afterEach, expect } = test;

  function owned(outcome: ClaimOutcome, expected: "acquired" | "takeover" | "reconcile"): Owned & Ownership {
    expect(outcome.outcome).toBe(expected);
    if (!("token" in outcome)) throw new Error(`expected ${expected}, got ${JSON.stringify(outcome)}`);
    return outcome;
  }

  function expectOk(outcome: WriteOutcome): Extract<WriteOutcome, { outcome: "ok" }> {
    expect(outcome).toMatchObject({ outcome: "ok" });
    if (outcome.outcome !== "ok") throw new Error(`expected ok, got ${JSON.stringify(outcome)}`);
    return outcome;
  }

  describe(`OnceStore conformance: ${name}`, () => {
    let fixture: StoreFixture;
    let store: OnceStore;

    beforeEach(async () => {
      fixture = await setup({});
      store = fixture.store;
    });

    afterEach(async () => {
      await fixture.teardown();
    });

    /** Claims `key` and returns the ownership, asserting the outcome. */
    async function acquire(key: string, overrides: Partial<ClaimRequest> = {}) {
      return owned(await store.claim(request(key, overrides)), "acquired");
    }

    /** A key whose record is `unknown`: claimed, effect begun, outcome lost. */
    async function unknownKey(): Promise<{ key: string; fence: number }> {
      const key = randomKey();
      const first = await acquire(key);
      expectOk(await store.beginEffect(key, first.token));
      expectOk(await store.markUnknown(key, first.token, timeout));
      return { key, fence: first.fence };
    }

    /** A key being reconciled: its record was unknown and this owner now reconciles it. */
    async function reconcilingKey(leaseMs = LONG_LEASE_MS) {
      const { key } = await unknownKey();
      const reconciler = owned(await store.claim(request(key, { leaseMs })), "reconcile");
      return { key, reconciler };
    }

    describe("claim", () => {
      it("acquires a fresh key: fence 1, one claim, a token <fence>.<nonce>, the lease on the record", async () => {
        const key = randomKey();
        const outcome = await acquire(key);
        expect(outcome).toMatchObject({ outcome: "acquired", fence: 1, claims: 1 });
        expect(outcome.token).toMatch(/^1\.[^.]+$/);

        const record = await store.get(key);
        expect(record).toMatchObject({
          key,
          state: "claimed",
          phase: "prepare",
          fence: 1,
          owner: outcome.token,
          leaseUntil: outcome.leaseUntil,
          fingerprint: "fp-0123",
          tool: "charge_card",
          claims: 1,
          trace: request(key).trace,
        });
        expect(record?.leaseUntil).toBe((record?.updatedAt ?? 0) + LONG_LEASE_MS);
        expect(record?.createdAt).toBe(record?.updatedAt);
        expect(record?.result).toBeUndefined();
        expect(record?.error).toBeUndefined();
        expect(record?.ttlMs).toBeGreaterThan(0);
        expect(record?.ttlMs).toBeLessThanOrEqual(fixture.retentionMs);
      });

      it("starts a tool without a prepare step in the effect phase", async () => {
        const key = randomKey();
        await acquire(key, { phase: "effect" });
        expect((await store.get(key))?.phase).toBe("effect");
      });

      it("gives a key to exactly one of 100 concurrent claims; the other 99 are in flight", async () => {
        const key = randomKey();
        const lease = 2_000;
        const outcomes = await Promise.all(
          Array.from({ length: 100 }, () => store.claim(request(key, { leaseMs: lease }))),
        );
        const acquired = outcomes.filter((o) => o.outcome === "acquired");
        const inFlight = outcomes.filter((o) => o.outcome === "in_flight");
        expect(acquired).toHaveLength(1);
        expect(inFlight).toHaveLength(99);
        for (const o of inFlight) {
          expect(o).toMatchObject({ state: "claimed", fence: 1 });
          expect(o.retryAfterMs).toBeGreaterThan(0);
          expect(o.retryAfterMs).toBeLessThanOrEqual(lease);
        }
        expect(await store.get(key)).toMatchObject({ state: "claimed", fence: 1, claims: 1 });
      });

      it("says in_flight with retryAfterMs from the remaining lease, without touching the record", async () => {
        const key = randomKey();
        const lease = 1_000;
        await acquire(key, { leaseMs: lease });
        const before = await store.get(key);
        await sleep(300);
        const outcome = await store.claim(request(key, { leaseMs: lease }));
        expect(outcome).toMatchObject({ outcome: "in_flight", state: "claimed", fence: 1 });
        if (outcome.outcome !== "in_flight") return;
        expect(outcome.retryAfterMs).toBeGreaterThanOrEqual(50);
        // 20 ms of slack: the store's clock and this process's timers are different clocks.
        expect(outcome.retryAfterMs).toBeLessThanOrEqual(lease - 300 + 20);
        expect(frozen(await store.get(key))).toEqual(frozen(before));
      });

      it("caps retryAfterMs at 5 s for a long lease", async () => {
        const key = randomKey();
        await acquire(key, { leaseMs: 60_000 });
        expect(await store.claim(request(key))).toMatchObject({ outcome: "in_flight", retryAfterMs: 5_000 });
      });

      it("refuses a different fingerprint with conflict, in every state, and changes nothing", async () => {
        const key = randomKey();
        const first = await acquire(key);
        const before = await store.get(key);
        const other = request(key, { fingerprint: "fp-other", tool: "send_email" });
        expect(await store.claim(other)).toEqual({ outcome: "conflict", tool: "charge_card" });
        expect(frozen(await store.get(key))).toEqual(frozen(before));

        expectOk(await store.complete(key, first.token, '{"ok":true}'));
        expect(await store.claim(other)).toEqual({ outcome: "conflict", tool: "charge_card" });
      });

      it("replays the exact result string of a done record, with the trace of the attempt that ran", async () => {
        const key = randomKey();
        const result =
          '{ "id": "ch_1",  "amount": 1999, "note": "naïve \\u00e9 ✓", "nested": [1, {"a": null}] }';
        const first = await acquire(key, {
          trace: "00-11111111111111111111111111111111-2222222222222222-01",
        });
        expectOk(await store.beginEffect(key, first.token));
        expectOk(await store.complete(key, first.token, result));
        const before = await store.get(key);

        for (let i = 0; i < 3; i++) {
          const replay = await store.claim(
            request(key, { trace: "00-33333333333333333333333333333333-4444444444444444-01" }),
          );
          expect(replay).toEqual({
            outcome: "replay",
            result,
            fence: 1,
            trace: "00-11111111111111111111111111111111-2222222222222222-01",
          });
        }
        expect(frozen(await store.get(key))).toEqual(frozen(before));
      });

      it("replays the stored error of a failed record and runs nothing", async () => {
        const key = randomKey();
        const first = await acquire(key);
        expectOk(await store.beginEffect(key, first.token));
        expect(await store.failTerminal(key, first.token, declined)).toEqual({ outcome: "ok", fence: 1 });
        const record = await store.get(key);
        expect(record).toMatchObject({ state: "failed", error: declined, fence: 1 });
        expect(record?.owner).toBeUndefined();
        expect(record?.leaseUntil).toBeUndefined();

        const replay = await store.claim(request(key));
        expect(replay).toMatchObject({ outcome: "replay_error", error: declined, fence: 1 });
        expect(frozen(await store.get(key))).toEqual(frozen(record));
      });
    });

    describe("lease expiry", () => {
      it("hands a prepare-phase key over to a new owner: takeover, fence + 1", async () => {
        const key = randomKey();
        const first = await acquire(key, { leaseMs: LEASE_MS });
        await sleep(LEASE_MS + MARGIN_MS);
        const second = owned(await store.claim(request(key)), "takeover");
        expect(second).toMatchObject({ fence: 2, claims: 2 });
        expect(second.token).toMatch(/^2\./);
        expect(second.token).not.toBe(first.token);
        expect(await store.get(key)).toMatchObject({
          state: "claimed",
          phase: "prepare",
          owner: second.token,
        });
      });

      it("reconciles an effect-phase key whose owner died, never acquires it", async () => {
        const key = randomKey();
        const first = await acquire(key, { leaseMs: LEASE_MS });
        expectOk(await store.beginEffect(key, first.token));
        await sleep(LEASE_MS + MARGIN_MS);
        const second = owned(await store.claim(request(key)), "reconcile");
        expect(second).toMatchObject({ from: "claimed", fence: 2, claims: 2 });
        expect(await store.get(key)).toMatchObject({
          state: "reconciling",
          phase: "effect",
          owner: second.token,
        });
      });

      it("reconciles a key claimed straight into the effect phase whose owner died", async () => {
        const key = randomKey();
        await acquire(key, { leaseMs: LEASE_MS, phase: "effect" });
        await sleep(LEASE_MS + MARGIN_MS);
        expect(await store.claim(request(key, { phase: "effect" }))).toMatchObject({
          outcome: "reconcile",
          from: "claimed",
          fence: 2,
        });
      });

      it("reconciles again, fence + 1, when the reconciler's lease runs out", async () => {
        const { key, reconciler } = await reconcilingKey(LEASE_MS);
        expect(await store.claim(request(key))).toMatchObject({ outcome: "in_flight", state: "reconciling" });
        await sleep(LEASE_MS + MARGIN_MS);
        const next = owned(await store.claim(request(key)), "reconcile");
        expect(next).toMatchObject({ from: "reconciling", fence: reconciler.fence + 1 });
        expect(await store.resolveApplied(key, reconciler.token, "{}")).toEqual({ outcome: "lost" });
      });

      it("never deletes the record: an expired lease is a field the next claim reads", async () => {
        const key = randomKey();
        const first = await acquire(key, { leaseMs: LEASE_MS });
        await sleep(LEASE_MS + MARGIN_MS);
        const record = await store.get(key);
        expect(record).toMatchObject({ state: "claimed", owner: first.token, leaseUntil: first.leaseUntil });
        expect(record?.ttlMs).toBeGreaterThan(LEASE_MS);
      });

      it("lets an owner whose lease ran out finish while nobody has taken the key", async () => {
        const key = randomKey();
        const first = await acquire(key, { leaseMs: LEASE_MS });
        await sleep(LEASE_MS + MARGIN_MS);
        expect(await store.complete(key, first.token, "1")).toEqual({ outcome: "ok", fence: 1 });
      });
    });

    describe("owner writes are fenced by the full token", () => {
      it("answers lost to a former owner on every write and leaves the record unchanged", async () => {
        const key = randomKey();
        const stale = await acquire(key, { leaseMs: LEASE_MS });
        await sleep(LEASE_MS + MARGIN_MS);
        const current = owned(await store.claim(request(key)), "takeover");
        const before = await store.get(key);

        const writes: [string, () => Promise<WriteOutcome>][] = [
          ["beginEffect", () => store.beginEffect(key, stale.token)],
          ["complete", () => store.complete(key, stale.token, '{"stale":true}')],
          ["failTerminal", () => store.failTerminal(key, stale.token, declined)],
          ["release", () => store.release(key, stale.token)],
          ["release notApplied", () => store.release(key, stale.token, { notApplied: true })],
          ["markUnknown", () => store.markUnknown(key, stale.token, timeout)],
          ["heartbeat", () => store.heartbeat(key, stale.token, LONG_LEASE_MS)],
          ["resolveApplied", () => store.resolveApplied(key, stale.token, "{}")],
          ["resolveNotApplied", () => store.resolveNotApplied(key, stale.token)],
          ["giveUp", () => store.giveUp(key, stale.token)],
        ];
        for (const [label, write] of writes) {
          expect([label, await write()]).toEqual([label, { outcome: "lost" }]);
        }
        expect(frozen(await store.get(key))).toEqual(frozen(before));
        expect((await store.get(key))?.owner).toBe(current.token);
      });

      it("compares the whole token: the right fence with another nonce is lost", async () => {
        const key = randomKey();
        const owner = await acquire(key);
        const before = await store.get(key);
        for (const forged of [
          `${owner.fence}.0000000000000000`,
          `${owner.fence}`,
          owner.token.slice(0, -1),
          "",
        ]) {
          expect(await store.complete(key, forged, "1")).toEqual({ outcome: "lost" });
          expect(await store.heartbeat(key, forged, LONG_LEASE_MS)).toEqual({ outcome: "lost" });
        }
        expect(frozen(await store.get(key))).toEqual(frozen(before));
      });

      it("answers lost for a key with no record", async () => {
        const key = randomKey();
        expect(await store.complete(key, "1.abc", "1")).toEqual({ outcome: "lost" });
        expect(await store.heartbeat(key, "1.abc", LEASE_MS)).toEqual({ outcome: "lost" });
        expect(await store.get(key)).toBeUndefined();
      });

      it("answers lost once the owner has settled the record", async () => {
        const key = randomKey();
        const owner = await acquire(key);
        expectOk(await store.complete(key, owner.token, '"first"'));
        const before = await store.get(key);
        expect(await store.complete(key, owner.token, '"second"')).toEqual({ outcome: "lost" });
        expect(await store.heartbeat(key, owner.token, LONG_LEASE_MS)).toEqual({ outcome: "lost" });
        expect(frozen(await store.get(key))).toEqual(frozen(before));
      });
    });

    describe("owner transitions", () => {
      it("beginEffect moves a claimed record to the effect phase and keeps the lease", async () => {
        const key = randomKey();
        const owner = await acquire(key);
        expect(await store.beginEffect(key, owner.token)).toEqual({
          outcome: "ok",
          fence: 1,
          leaseUntil: owner.leaseUntil,
        });
        expect(await store.get(key)).toMatchObject({ state: "claimed", phase: "effect", owner: owner.token });
      });

      it("complete stores the result, drops owner and lease, and refreshes retention", async () => {
        const key = randomKey();
        const owner = await acquire(key);
        expectOk(await store.beginEffect(key, owner.token));
        expect(await store.complete(key, owner.token, '{"id":"ch_1"}')).toEqual({ outcome: "ok", fence: 1 });
        const record = await store.get(key);
        expect(record).toMatchObject({ state: "done", phase: "effect", result: '{"id":"ch_1"}', fence: 1 });
        expect(record?.owner).toBeUndefined();
        expect(record?.leaseUntil).toBeUndefined();
        expect(record?.error).toBeUndefined();
        expect(record?.ttlMs).toBeGreaterThan(fixture.retentionMs - 5_000);
      });

      it("release in the prepare phase frees the key: the next claim acquires it, fence + 1", async () => {
        const key = randomKey();
        const first = await acquire(key);
        expect(await store.release(key, first.token)).toEqual({ outcome: "ok", fence: 1 });
        const released = await store.get(key);
        expect(released).toMatchObject({ state: "released", fence: 1 });
        expect(released?.owner).toBeUndefined();
        expect(released?.leaseUntil).toBeUndefined();

        const second = owned(await store.claim(request(key, { phase: "effect" })), "acquired");
        expect(second).toMatchObject({ fence: 2, claims: 2 });
        expect(await store.get(key)).toMatchObject({
          state: "claimed",
          phase: "effect",
          owner: second.token,
        });
      });

      it("refuses a plain release in the effect phase and changes nothing", async () => {
        const key = randomKey();
        const owner = await acquire(key);
        expectOk(await store.beginEffect(key, owner.token));
        const before = await store.get(key);
        const refused = await store.release(key, owner.token);
        expect(refused.outcome).toBe("refused");
        expect(frozen(await store.get(key))).toEqual(frozen(before));
        expect(await store.release(key, owner.token, { notApplied: false })).toMatchObject({
          outcome: "refused",
        });
      });

      it("allows a release in the effect phase with the not-applied assertion", async () => {
        const key = randomKey();
        const owner = await acquire(key);
        expectOk(await store.beginEffect(key, owner.token));
        expect(await store.release(key, owner.token, { notApplied: true })).toEqual({
          outcome: "ok",
          fence: 1,
        });
        expect(await store.get(key)).toMatchObject({ state: "released" });
        expect(await store.claim(request(key))).toMatchObject({ outcome: "acquired", fence: 2 });
      });

      it("markUnknown keeps why; the next claim reconciles, fence + 1, and never acquires", async () => {
        const key = randomKey();
        const owner = await acquire(key);
        expectOk(await store.beginEffect(key, owner.token));
        expect(await store.markUnknown(key, owner.token, timeout)).toEqual({ outcome: "ok", fence: 1 });
        const record = await store.get(key);
        expect(record).toMatchObject({ state: "unknown", error: timeout, fence: 1 });
        expect(record?.owner).toBeUndefined();

        const reconciler = owned(await store.claim(request(key)), "reconcile");
        expect(reconciler).toMatchObject({ from: "unknown", fence: 2, claims: 2 });
        expect(await store.get(key)).toMatchObject({
          state: "reconciling",
          phase: "effect",
          owner: reconciler.token,
        });
        expect(await store.claim(request(key))).toMatchObject({
          outcome: "in_flight",
          state: "reconciling",
          fence: 2,
        });
      });

      it("markUnknown without an error stores none", async () => {
        const key = randomKey();
        const owner = await acquire(key);
        expectOk(await store.markUnknown(key, owner.token));
        const record = await store.get(key);
        expect(record?.state).toBe("unknown");
        expect(record?.error).toBeUndefined();
      });

      it("refuses writes the state does not allow, and changes nothing", async () => {
        const { key, reconciler } = await reconcilingKey();
        const before = await store.get(key);
        for (const write of [
          () => store.beginEffect(key, reconciler.token),
          () => store.complete(key, reconciler.token, "1"),
          () => store.failTerminal(key, reconciler.token, declined),
          () => store.release(key, reconciler.token, { notApplied: true }),
          () => store.markUnknown(key, reconciler.token),
        ]) {
          expect((await write()).outcome).toBe("refused");
        }
        expect(frozen(await store.get(key))).toEqual(frozen(before));

        const other = randomKey();
        const owner = await acquire(other);
        const claimed = await store.get(other);
        expect((await store.resolveApplied(other, owner.token, "1")).outcome).toBe("refused");
        expect((await store.resolveNotApplied(other, owner.token)).outcome).toBe("refused");
        expect((await store.giveUp(other, owner.token)).outcome).toBe("refused");
        expect(frozen(await store.get(other))).toEqual(frozen(claimed));
      });
    });

    describe("heartbeat", () => {
      it("extends the lease, so a claim after the first lease is still in flight", async () => {
        const key = randomKey();
        const owner = await acquire(key, { leaseMs: LEASE_MS });
        await sleep(LEASE_MS / 2);
        const beat = expectOk(await store.heartbeat(key, owner.token, 1_000));
        expect(beat.fence).toBe(1);
        expect(beat.leaseUntil).toBeGreaterThan(owner.leaseUntil);
        expect((await store.get(key))?.leaseUntil).toBe(beat.leaseUntil);
        await sleep(LEASE_MS / 2 + MARGIN_MS);
        expect(await store.claim(request(key))).toMatchObject({ outcome: "in_flight", state: "claimed" });
      });

      it("extends a reconciler's lease", async () => {
        const { key, reconciler } = await reconcilingKey(LEASE_MS);
        const beat = expectOk(await store.heartbeat(key, reconciler.token, 1_000));
        expect(beat.leaseUntil).toBeGreaterThan(reconciler.leaseUntil);
        await sleep(LEASE_MS + MARGIN_MS);
        expect(await store.claim(request(key))).toMatchObject({ outcome: "in_flight", state: "reconciling" });
      });
    });

    describe("bad leases", () => {
      /** Whether `attempt` was refused with a RangeError, as every store refuses a lease it cannot keep. */
      async function refusedRange(attempt: () => Promise<unknown>): Promise<boolean> {
        try {
          await attempt();
          return false;
        } catch (error) {
          return error instanceof RangeError;
        }
      }

      it("refuses a claim whose lease is not a positive integer, and writes nothing", async () => {
        for (const leaseMs of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
          const key = randomKey();
          expect(await refusedRange(() => store.claim(request(key, { leaseMs })))).toBe(true);
          expect(await store.get(key)).toBeUndefined();
        }
      });

      it("refuses a heartbeat whose lease is not a positive integer, and keeps the lease it had", async () => {
        const key = randomKey();
        const owner = await acquire(key);
        for (const leaseMs of [0, -5, 2.5, Number.NaN])
          expect(await refusedRange(() => store.heartbeat(key, owner.token, leaseMs))).toBe(true);
        expect((await store.get(key))?.leaseUntil).toBe(owner.leaseUntil);
      });
    });

    describe("reconcile", () => {
      it("resolveApplied settles the record as done; later claims replay it", async () => {
        const { key, reconciler } = await reconcilingKey();
        expect(await store.resolveApplied(key, reconciler.token, '{"id":"ch_found"}')).toEqual({
          outcome: "ok",
          fence: reconciler.fence,
        });
        const record = await store.get(key);
        expect(record).toMatchObject({ state: "done", result: '{"id":"ch_found"}' });
        expect(record?.owner).toBeUndefined();
        expect(record?.error).toBeUndefined();
        expect(await store.claim(request(key))).toMatchObject({
          outcome: "replay",
          result: '{"id":"ch_found"}',
        });
      });

      it("resolveNotApplied hands the key back to the same token in the effect phase", async () => {
        const { key, reconciler } = await reconcilingKey();
        expect(await store.resolveNotApplied(key, reconciler.token)).toEqual({
          outcome: "ok",
          fence: reconciler.fence,
          leaseUntil: reconciler.leaseUntil,
        });
        expect(await store.get(key)).toMatchObject({
          state: "claimed",
          phase: "effect",
          owner: reconciler.token,
          fence: reconciler.fence,
        });
        expect(await store.claim(request(key))).toMatchObject({ outcome: "in_flight", state: "claimed" });
        expect(await store.complete(key, reconciler.token, "2")).toEqual({
          outcome: "ok",
          fence: reconciler.fence,
        });
        expect(await store.claim(request(key))).toMatchObject({ outcome: "replay", result: "2" });
      });

      it("giveUp returns the record to unknown with why; the next claim reconciles again", async () => {
        const { key, reconciler } = await reconcilingKey();
        const why: StoredError = { name: "Error", message: "no reconcile hook" };
        expect(await store.giveUp(key, reconciler.token, why)).toEqual({
          outcome: "ok",
          fence: reconciler.fence,
        });
        const record = await store.get(key);
        expect(record).toMatchObject({ state: "unknown", error: why, fence: reconciler.fence });
        expect(record?.owner).toBeUndefined();
        expect(await store.claim(request(key))).toMatchObject({
          outcome: "reconcile",
          from: "unknown",
          fence: reconciler.fence + 1,
        });
      });
    });

    describe("operator resolve", () => {
      it("resolves unknown as applied: done with the result, fence + 1, who/when/why kept", async () => {
        const { key, fence } = await unknownKey();
        const outcome = await store.resolve(key, {
          decision: { as: "applied", result: '{"id":"ch_manual"}' },
          by: "alice@example.com",
          why: "found ch_manual in the provider dashboard",
          expectFence: fence,
        });
        expect(outcome).toEqual({ outcome: "ok", fence: fence + 1 });
        const record = await store.get(key);
        expect(record).toMatchObject({
          state: "done",
          fence: fence + 1,
          result: '{"id":"ch_manual"}',
          resolution: {
            as: "applied",
            by: "alice@example.com",
            why: "found ch_manual in the provider dashboard",
          },
        });
        expect(record?.resolution?.at).toBe(record?.updatedAt);
        expect(record?.error).toBeUndefined();
        expect(await store.claim(request(key))).toMatchObject({
          outcome: "replay",
          result: '{"id":"ch_manual"}',
        });
      });

      it("resolves unknown as not applied: released, and the next claim acquires with a higher fence", async () => {
        const { key, fence } = await unknownKey();
        expect(
          await store.resolve(key, { decision: { as: "not_applied" }, by: "bob", why: "no charge" }),
        ).toEqual({
          outcome: "ok",
          fence: fence + 1,
        });
        const record = await store.get(key);
        expect(record).toMatchObject({
          state: "released",
          resolution: { as: "not_applied", by: "bob", why: "no charge" },
        });
        expect(record?.error).toBeUndefined();
        expect(await store.claim(request(key))).toMatchObject({ outcome: "acquired", fence: fence + 2 });
      });

      it("resolves unknown as failed: the error is replayed", async () => {
        const { key, fence } = await unknownKey();
        expectOk(
          await store.resolve(key, {
            decision: { as: "failed", error: declined },
            by: "carol",
            why: "declined",
          }),
        );
        expect(await store.get(key)).toMatchObject({
          state: "failed",
          error: declined,
          fence: fence + 1,
          resolution: { as: "failed", by: "carol", why: "declined" },
        });
        expect(await store.claim(request(key))).toMatchObject({ outcome: "replay_error", error: declined });
      });

      it("is refused unless the record is unknown, and changes nothing", async () => {
        const key = randomKey();
        const decision = { decision: { as: "not_applied" as const }, by: "dave", why: "oops" };
        const none = await store.resolve(key, decision);
        expect(none.outcome).toBe("refused");
        expect(await store.get(key)).toBeUndefined();

        const owner = await acquire(key);
        const claimed = await store.get(key);
        expect((await store.resolve(key, decision)).outcome).toBe("refused");
        expect(frozen(await store.get(key))).toEqual(frozen(claimed));

        expectOk(await store.complete(key, owner.token, "1"));
        const done = await store.get(key);
        expect((await store.resolve(key, decision)).outcome).toBe("refused");
        expect(frozen(await store.get(key))).toEqual(frozen(done));

        const { key: reconciling } = await reconcilingKey();
        const before = await store.get(reconciling);
        expect((await store.resolve(reconciling, decision)).outcome).toBe("refused");
        expect(frozen(await store.get(reconciling))).toEqual(frozen(before));
      });

      it("is refused when the record moved on from the fence the operator saw", async () => {
        const { key, fence } = await unknownKey();
        const before = await store.get(key);
        const outcome = await store.resolve(key, {
          decision: { as: "applied", result: "1" },
          by: "erin",
          why: "stale view",
          expectFence: fence + 1,
        });
        expect(outcome.outcome).toBe("refused");
        expect(frozen(await store.get(key))).toEqual(frozen(before));
      });

      it("fences out the owner of a record an operator resolved", async () => {
        // An operator re-fires: resolve not_applied, a new owner claims; the reconciler before it has lost.
        const { key } = await unknownKey();
        const reconciler = owned(await store.claim(request(key, { leaseMs: LEASE_MS })), "reconcile");
        expectOk(await store.giveUp(key, reconciler.token));
        expectOk(await store.resolve(key, { decision: { as: "not_applied" }, by: "frank", why: "re-fire" }));
        const next = owned(await store.claim(request(key)), "acquired");
        expect(next.fence).toBe(reconciler.fence + 2);
        expect(await store.complete(key, reconciler.token, "1")).toEqual({ outcome: "lost" });
      });
    });

    describe("approvals (an ApprovalStore)", () => {
      const reason = "amount 250 is over 100";

      /** The store as an ApprovalStore; a store without approvals skips these tests (it runs no such tool). */
      function approvals(): ApprovalStore | undefined {
        return isApprovalStore(store) ? store : undefined;
      }

      /** A key awaiting approval: claimed, then the owner asked for a person's yes. */
      async function pendingKey(s: ApprovalStore, ttlMs = LONG_LEASE_MS) {
        const key = randomKey();
        const owner = await acquire(key);
        const asked = await s.requestApproval(key, owner.token, { reason, ttlMs });
        expect(asked).toMatchObject({ outcome: "ok", fence: owner.fence });
        if (asked.outcome !== "ok") throw new Error(`expected ok, got ${JSON.stringify(asked)}`);
        return { key, owner, asked };
      }

      function decision(
        record: OnceRecord | undefined,
        overrides: Partial<DecisionRequest> = {},
      ): DecisionRequest {
        return {
          decision: "approved",
          by: "alice@example.com",
          why: "the customer confirmed by phone",
          expectFence: record?.fence ?? 0,
          fingerprint: record?.fingerprint ?? "",
          ...overrides,
        };
      }

      it("requestApproval: claimed → awaiting_approval, owner and lease given up, the request kept", async () => {
        const s = approvals();
        if (!s) return;
        const { key, owner, asked } = await pendingKey(s);
        expect(asked.expiresAt - asked.requestedAt).toBe(LONG_LEASE_MS);
        const record = await s.get(key);
        expect(record).toMatchObject({
          state: "awaiting_approval",
          fence: owner.fence,
          approval: { reason, requestedAt: asked.requestedAt, expiresAt: asked.expiresAt },
        });
        expect(record?.owner).toBeUndefined();
        expect(record?.leaseUntil).toBeUndefined();
        expect(record?.approval?.decision).toBeUndefined();
        // The former owner holds nothing now: its writes are lost.
        expect(await s.complete(key, owner.token, "1")).toEqual({ outcome: "lost" });
        expect(frozen(await s.get(key))).toEqual(frozen(record));
      });

      it("claim of a pending request: the same pending answer every time, nothing granted", async () => {
        const s = approvals();
        if (!s) return;
        const { key, asked } = await pendingKey(s);
        const before = await s.get(key);
        for (let i = 0; i < 2; i++) {
          expect(await s.claim(request(key))).toEqual({
            outcome: "awaiting_approval",
            reason,
            requestedAt: asked.requestedAt,
            expiresAt: asked.expiresAt,
            fence: asked.fence,
          });
        }
        expect(frozen(await s.get(key))).toEqual(frozen(before));
        expect(await s.claim(request(key, { fingerprint: "fp-other" }))).toMatchObject({
          outcome: "conflict",
        });
      });

      it("requestApproval is fenced, only from claimed, and asked once per record", async () => {
        const s = approvals();
        if (!s) return;
        const key = randomKey();
        const owner = await acquire(key);
        expect(await s.requestApproval(key, `${owner.fence}.forged`, { reason, ttlMs: 1_000 })).toEqual({
          outcome: "lost",
        });
        expect(await s.requestApproval(randomKey(), owner.token, { reason, ttlMs: 1_000 })).toEqual({
          outcome: "lost",
        });
        const { key: reconciling, reconciler } = await reconcilingKey();
        const before = await s.get(reconciling);
        expect(
          (await s.requestApproval(reconciling, reconciler.token, { reason, ttlMs: 1_000 })).outcome,
        ).toBe("refused");
        expect(frozen(await s.get(reconciling))).toEqual(frozen(before));

        // Approved, then claimed again: the new owner may not ask a second time.
        const pending = await pendingKey(s);
        expectOk(await s.decide(pending.key, decision(await s.get(pending.key))));
        const next = owned(await s.claim(request(pending.key)), "acquired");
        const asked = await s.requestApproval(pending.key, next.token, { reason, ttlMs: 1_000 });
        expect(asked.outcome).toBe("refused");
        expect((await s.get(pending.key))?.state).toBe("claimed");
      });

      it("approve: fence + 1, who/when/why kept; the next claim runs it, marked approved, and only one", async () => {
        const s = approvals();
        if (!s) return;
        const { key, asked } = await pendingKey(s);
        const outcome = await s.decide(key, decision(await s.get(key)));
        expect(outcome).toEqual({ outcome: "ok", fence: asked.fence + 1 });
        const record = await s.get(key);
        expect(record).toMatchObject({
          state: "approved",
          fence: asked.fence + 1,
          approval: {
            reason,
            decision: { as: "approved", by: "alice@example.com", why: "the customer confirmed by phone" },
          },
        });
        expect(record?.approval?.decision?.at).toBe(record?.updatedAt);
        const runner = owned(await s.claim(request(key)), "acquired");
        expect(runner).toMatchObject({ fence: asked.fence + 2, approved: true });
        // A second resume finds the key owned: it waits, it does not run.
        expect(await s.claim(request(key))).toMatchObject({ outcome: "in_flight" });
        expectOk(await s.beginEffect(key, runner.token));
        expectOk(await s.complete(key, runner.token, '"ch_1"'));
        expect(await s.claim(request(key))).toMatchObject({ outcome: "replay", result: '"ch_1"' });
        expect((await s.get(key))?.approval?.decision).toMatchObject({ as: "approved" });
      });

      it("an approval outlives a crash of its runner: takeover and re-claim after release stay approved", async () => {
        const s = approvals();
        if (!s) return;
        const { key } = await pendingKey(s);
        expectOk(await s.decide(key, decision(await s.get(key))));
        const first = owned(await s.claim(request(key, { leaseMs: LEASE_MS })), "acquired");
        await sleep(LEASE_MS + MARGIN_MS);
        const second = owned(await s.claim(request(key)), "takeover");
        expect(second.approved).toBe(true);
        expectOk(await s.release(key, second.token));
        expect(owned(await s.claim(request(key)), "acquired")).toMatchObject({
          approved: true,
          fence: first.fence + 2,
        });
      });

      it("deny: a terminal failure (denied) replayed to every retry, who/when/why kept", async () => {
        const s = approvals();
        if (!s) return;
        const { key, asked } = await pendingKey(s);
        const outcome = await s.decide(
          key,
          decision(await s.get(key), { decision: "denied", by: "bob", why: "over the limit" }),
        );
        expect(outcome).toEqual({ outcome: "ok", fence: asked.fence + 1 });
        const denied = deniedError("bob", "over the limit");
        expect(await s.get(key)).toMatchObject({
          state: "failed",
          error: denied,
          approval: { decision: { as: "denied", by: "bob", why: "over the limit" } },
        });
        for (let i = 0; i < 2; i++)
          expect(await s.claim(request(key))).toMatchObject({ outcome: "replay_error", error: denied });
      });

      it("a decision is refused, the record unchanged, unless it is about exactly the pending call", async () => {
        const s = approvals();
        if (!s) return;
        const none = randomKey();
        expect((await s.decide(none, decision(undefined, { fingerprint: "fp-0123" }))).outcome).toBe(
          "refused",
        );
        expect(await s.get(none)).toBeUndefined();

        const claimedKey = randomKey();
        await acquire(claimedKey);
        const claimed = await s.get(claimedKey);
        expect((await s.decide(claimedKey, decision(claimed))).outcome).toBe("refused");
        expect(frozen(await s.get(claimedKey))).toEqual(frozen(claimed));

        const { key } = await pendingKey(s);
        const pending = await s.get(key);
        const wrongFingerprint = decision(pending, { fingerprint: "fp-another-input" });
        expect((await s.decide(key, wrongFingerprint)).outcome).toBe("refused");
        const staleFence = decision(pending, { expectFence: (pending?.fence ?? 0) - 1 });
        expect((await s.decide(key, staleFence)).outcome).toBe("refused");
        expect(frozen(await s.get(key))).toEqual(frozen(pending));

        // Decided once: a second decision, either way, is about a record that moved on.
        expectOk(await s.decide(key, decision(pending)));
        const approved = await s.get(key);
        expect((await s.decide(key, decision(pending, { decision: "denied" }))).outcome).toBe("refused");
        expect((await s.decide(key, decision(approved, { decision: "denied" }))).outcome).toBe("refused");
        expect(frozen(await s.get(key))).toEqual(frozen(approved));
      });

      it("expiry: a decision is refused, and the next claim fails it for good (approval_expired)", async () => {
        const s = approvals();
        if (!s) return;
        const { key } = await pendingKey(s, LEASE_MS);
        await sleep(LEASE_MS + MARGIN_MS);
        const pending = await s.get(key);
        expect(pending?.state).toBe("awaiting_approval");
        expect((await s.decide(key, decision(pending))).outcome).toBe("refused");
        expect(frozen(await s.get(key))).toEqual(frozen(pending));
        for (let i = 0; i < 2; i++)
          expect(await s.claim(request(key))).toMatchObject({
            outcome: "replay_error",
            error: APPROVAL_EXPIRED_ERROR,
          });
        const record = await s.get(key);
        expect(record).toMatchObject({ state: "failed", error: APPROVAL_EXPIRED_ERROR });
        expect(record?.approval?.decision?.as).toBe("expired");
        expect((await s.decide(key, decision(record))).outcome).toBe("refused");
      });
    });

    describe("tasks (a TaskStore)", () => {
      const by = "ops@example.com";
      const why = "the customer withdrew the order";

      /** The store as a TaskStore; a store that knows no tasks skips these tests (no claim names one there). */
      function tasks(): TaskStore | undefined {
        return isTaskStore(store) ? store : undefined;
      }

      /** A fresh task of its own; `step(n)` is the identity of its step n, `key(n)` that step's key. */
      function newTask() {
        const ref = { namespace: "conformance", taskId: `task-${randomKey().slice(0, 16)}` };
        const step = (n: number): TaskIdentity => ({ ...ref, stepId: `step-${n}` });
        return { ref, step, key: (n: number) => deriveKey(step(n)) };
      }

      /** Claims step `n` of `task`, naming the task, and returns the ownership. */
      async function acquireStep(
        task: ReturnType<typeof newTask>,
        n: number,
        overrides: Partial<ClaimRequest> = {},
      ) {
        return acquire(task.key(n), { task: task.step(n), ...overrides });
      }

      /** The error code `attempt` was refused with, or undefined when it was not refused. */
      async function refusalCode(attempt: () => Promise<unknown>): Promise<unknown> {
        try {
          await attempt();
          return undefined;
        } catch (error) {
          return (error as { code?: unknown }).code;
        }
      }

      function expectCancelled(outcome: CancelOutcome) {
        expect(outcome).toMatchObject({ outcome: "cancelled", cancellation: { by, why } });
        expect(outcome.cancellation.at).toBeGreaterThan(0);
        return outcome;
      }

      it("a claim that names its task files it: the record keeps its identity, readTask lists it in filing order", async () => {
        const s = tasks();
        if (!s) return;
        const task = newTask();
        expect(await s.readTask(task.ref)).toEqual({ ...task.ref, records: [] });
        // Filed in the order 3, 1, 2; a second claim of step 3 does not file it again.
        const third = await acquireStep(task, 3);
        await acquireStep(task, 1);
        expectOk(await s.release(task.key(3), third.token));
        await acquireStep(task, 3);
        await acquireStep(task, 2, { phase: "effect" });
        // A claim of another task, and one naming no task, are not filed here.
        await acquireStep(newTask(), 1);
        await acquire(randomKey());

        const read = await s.readTask(task.ref);
        expect(read.namespace).toBe(task.ref.namespace);
        expect(read.taskId).toBe(task.ref.taskId);
        expect(read.cancellation).toBeUndefined();
        expect(read.records.map((r) => r.key)).toEqual([task.key(3), task.key(1), task.key(2)]);
        expect(read.records.map((r) => r.task)).toEqual([task.step(3), task.step(1), task.step(2)]);
        expect(read.records[0]).toMatchObject({ state: "claimed", fence: 2, claims: 2 });
        expect(frozen(read.records[2])).toEqual(frozen(await s.get(task.key(2))));
        expect((await s.get(task.key(1)))?.task).toEqual(task.step(1));
        // The default namespace is "default", spelled out or not.
        const plain = { taskId: `task-${randomKey().slice(0, 16)}` };
        await acquire(deriveKey({ ...plain, stepId: "s" }), {
          task: { namespace: "default", ...plain, stepId: "s" },
        });
        const defaults = await s.readTask(plain);
        expect(defaults.namespace).toBe("default");
        expect(defaults.records).toHaveLength(1);
      });

      it("keepTaskIdentity false: records keep no identity; filing, readTask and cancel still work", async () => {
        const bare = await setup({ keepTaskIdentity: false });
        try {
          const s = bare.store;
          if (!isTaskStore(s)) return;
          const task = newTask();
          const owner = owned(await s.claim(request(task.key(1), { task: task.step(1) })), "acquired");
          const record = await s.get(task.key(1));
          expect(record?.state).toBe("claimed");
          expect(record?.task).toBeUndefined();
          const read = await s.readTask(task.ref);
          expect(read.records.map((r) => r.key)).toEqual([task.key(1)]);
          expect(read.records[0]?.task).toBeUndefined();
          expect(expectCancelled(await s.cancelTask(task.ref, { by, why })).stopped).toEqual([task.key(1)]);
          expect(await s.get(task.key(1))).toMatchObject({ state: "cancelled", fence: owner.fence + 1 });
          expect((await s.get(task.key(1)))?.task).toBeUndefined();
        } finally {
          await bare.teardown();
        }
      });

      it("cancel stops every call whose effect has not begun: cancelled, fence + 1, owner gone; claims answer cancelled", async () => {
        const s = tasks();
        if (!s) return;
        const task = newTask();
        const prepare = await acquireStep(task, 1);
        const released = await acquireStep(task, 2);
        expectOk(await s.release(task.key(2), released.token));
        const stoppedKeys = [task.key(1), task.key(2)];
        const a = isApprovalStore(s) ? s : undefined;
        if (a) {
          const pending = await acquireStep(task, 3);
          expect(
            (
              await a.requestApproval(task.key(3), pending.token, {
                reason: "over 100",
                ttlMs: LONG_LEASE_MS,
              })
            ).outcome,
          ).toBe("ok");
          const approved = await acquireStep(task, 4);
          expect(
            (
              await a.requestApproval(task.key(4), approved.token, {
                reason: "over 100",
                ttlMs: LONG_LEASE_MS,
              })
            ).outcome,
          ).toBe("ok");
          const asked = await a.get(task.key(4));
          expectOk(
            await a.decide(task.key(4), {
              decision: "approved",
              by: "alice",
              why: "ok",
              expectFence: asked?.fence ?? 0,
              fingerprint: "fp-0123",
            }),
          );
          stoppedKeys.push(task.key(3), task.key(4));
        }
        const before = new Map<string, OnceRecord | undefined>();
        for (const key of stoppedKeys) before.set(key, await s.get(key));

        const outcome = expectCancelled(await s.cancelTask(task.ref, { by, why }));
        expect(outcome.stopped).toEqual(stoppedKeys);
        expect(outcome.running).toEqual([]);
        for (const key of stoppedKeys) {
          const record = await s.get(key);
          expect(record).toMatchObject({
            key,
            state: "cancelled",
            fence: (before.get(key)?.fence ?? 0) + 1,
            fingerprint: "fp-0123",
            tool: "charge_card",
            cancellation: outcome.cancellation,
          });
          expect(record?.owner).toBeUndefined();
          expect(record?.leaseUntil).toBeUndefined();
          expect(record?.ttlMs).toBeGreaterThan(0);
        }
        // The old owners hold nothing: every write is lost, the record unchanged.
        const stoppedRecord = await s.get(task.key(1));
        for (const write of [
          () => s.beginEffect(task.key(1), prepare.token),
          () => s.complete(task.key(1), prepare.token, "1"),
          () => s.heartbeat(task.key(1), prepare.token, LONG_LEASE_MS),
          () => s.release(task.key(1), prepare.token),
          () => s.failTerminal(task.key(1), prepare.token, declined),
          () => s.markUnknown(task.key(1), prepare.token),
        ])
          expect(await write()).toEqual({ outcome: "lost" });
        expect(frozen(await s.get(task.key(1)))).toEqual(frozen(stoppedRecord));

        // Every claim is answered cancelled, naming the task or not, with any fingerprint, again and again.
        for (const key of stoppedKeys) {
          const fence = (await s.get(key))?.fence;
          const n = stoppedKeys.indexOf(key) + 1;
          for (const claim of [
            request(key, { task: task.step(n) }),
            request(key),
            request(key, { fingerprint: "fp-other", tool: "send_email" }),
          ])
            expect(await s.claim(claim)).toEqual({
              outcome: "cancelled",
              cancellation: outcome.cancellation,
              fence,
            });
        }
        // A step nobody claimed before is refused too, and nothing runs.
        expect(await s.claim(request(task.key(9), { task: task.step(9) }))).toEqual({
          outcome: "cancelled",
          cancellation: outcome.cancellation,
          fence: 0,
        });
        const after = await s.get(task.key(9));
        expect(after?.owner).toBeUndefined();
        expect(after === undefined || after.state === "cancelled").toBe(true);
        const read = await s.readTask(task.ref);
        expect(read.cancellation).toEqual(outcome.cancellation);
        expect(read.records.slice(0, stoppedKeys.length).map((r) => [r.key, r.state])).toEqual(
          stoppedKeys.map((key) => [key, "cancelled"]),
        );
      });

      it("cancel flags a call whose effect is running: state unchanged, its heartbeat answers cancelRequested", async () => {
        const s = tasks();
        if (!s) return;
        const task = newTask();
        const effect = await acquireStep(task, 1);
        expectOk(await s.beginEffect(task.key(1), effect.token));
        expect(
          expectOk(await s.heartbeat(task.key(1), effect.token, LONG_LEASE_MS)).cancelRequested,
        ).toBeUndefined();
        const direct = await acquireStep(task, 2, { phase: "effect" });
        const lost = await acquireStep(task, 3);
        expectOk(await s.beginEffect(task.key(3), lost.token));
        expectOk(await s.markUnknown(task.key(3), lost.token, timeout));
        const doubtful = await acquireStep(task, 4);
        expectOk(await s.beginEffect(task.key(4), doubtful.token));
        expectOk(await s.markUnknown(task.key(4), doubtful.token, timeout));
        const reconciler = owned(await s.claim(request(task.key(4), { task: task.step(4) })), "reconcile");
        const keys = [1, 2, 3, 4].map(task.key);
        const before = new Map<string, OnceRecord | undefined>();
        for (const key of keys) before.set(key, await s.get(key));

        const outcome = expectCancelled(await s.cancelTask(task.ref, { by, why }));
        expect(outcome.stopped).toEqual([]);
        expect(outcome.running).toEqual(keys);
        for (const key of keys) {
          const record = await s.get(key);
          const was = before.get(key);
          expect(record).toMatchObject({
            state: was?.state,
            phase: was?.phase,
            fence: was?.fence,
            cancellation: outcome.cancellation,
          });
          expect(record?.owner).toBe(was?.owner);
          expect(record?.leaseUntil).toBe(was?.leaseUntil);
        }
        // The owners are told at their next heartbeat, which still extends the lease, and settle as usual.
        const beat = expectOk(await s.heartbeat(task.key(1), effect.token, LONG_LEASE_MS));
        expect(beat.cancelRequested).toBe(true);
        expect(beat.leaseUntil).toBeGreaterThanOrEqual(effect.leaseUntil);
        expect(expectOk(await s.heartbeat(task.key(2), direct.token, LONG_LEASE_MS)).cancelRequested).toBe(
          true,
        );
        expect(
          expectOk(await s.heartbeat(task.key(4), reconciler.token, LONG_LEASE_MS)).cancelRequested,
        ).toBe(true);
        expect(await s.complete(task.key(1), effect.token, '"ch_1"')).toEqual({
          outcome: "ok",
          fence: effect.fence,
        });
        expect(await s.get(task.key(1))).toMatchObject({ state: "done", result: '"ch_1"' });
        expectOk(await s.markUnknown(task.key(2), direct.token, timeout));
        expectOk(await s.resolveApplied(task.key(4), reconciler.token, '"found"'));
        expect(await s.get(task.key(4))).toMatchObject({ state: "done", result: '"found"' });
        // A claim naming the cancelled task runs nothing, whatever the record's state.
        for (const n of [1, 2, 3, 4])
          expect(await s.claim(request(task.key(n), { task: task.step(n) }))).toMatchObject({
            outcome: "cancelled",
            cancellation: outcome.cancellation,
          });
      });

      it("cancel leaves done and failed records as they are", async () => {
        const s = tasks();
        if (!s) return;
        const task = newTask();
        const done = await acquireStep(task, 1);
        expectOk(await s.complete(task.key(1), done.token, '"kept"'));
        const failed = await acquireStep(task, 2);
        expectOk(await s.failTerminal(task.key(2), failed.token, declined));
        const before = [await s.get(task.key(1)), await s.get(task.key(2))];
        const outcome = expectCancelled(await s.cancelTask(task.ref, { by, why }));
        expect(outcome.stopped).toEqual([]);
        expect(outcome.running).toEqual([]);
        expect(frozen(await s.get(task.key(1)))).toEqual(frozen(before[0]));
        expect(frozen(await s.get(task.key(2)))).toEqual(frozen(before[1]));
        // A claim naming no task still replays them.
        expect(await s.claim(request(task.key(1)))).toMatchObject({ outcome: "replay", result: '"kept"' });
        expect(await s.claim(request(task.key(2)))).toMatchObject({
          outcome: "replay_error",
          error: declined,
        });
        expect((await s.readTask(task.ref)).records.map((r) => r.state)).toEqual(["done", "failed"]);
      });

      it("a second cancel answers already_cancelled with the first one's who, why and when, and changes nothing", async () => {
        const s = tasks();
        if (!s) return;
        const task = newTask();
        await acquireStep(task, 1);
        const first = expectCancelled(await s.cancelTask(task.ref, { by, why }));
        const record = await s.get(task.key(1));
        const second = await s.cancelTask(task.ref, { by: "someone-else", why: "again" });
        expect(second).toEqual({
          outcome: "already_cancelled",
          cancellation: first.cancellation,
          stopped: [],
          running: [],
        });
        expect(frozen(await s.get(task.key(1)))).toEqual(frozen(record));
        expect((await s.readTask(task.ref)).cancellation).toEqual(first.cancellation);
        // A task that was never claimed can be cancelled too; its first claim is then refused.
        const untouched = newTask();
        const empty = expectCancelled(await s.cancelTask(untouched.ref, { by, why }));
        expect(empty.stopped).toEqual([]);
        expect(await s.claim(request(untouched.key(1), { task: untouched.step(1) }))).toEqual({
          outcome: "cancelled",
          cancellation: empty.cancellation,
          fence: 0,
        });
      });

      it("refuses a cancel without `by` or of a task id that is not a key part (CancelRefusedError), and changes nothing", async () => {
        const s = tasks();
        if (!s) return;
        const task = newTask();
        const owner = await acquireStep(task, 1);
        const record = await s.get(task.key(1));
        const bad: [Parameters<TaskStore["cancelTask"]>[0], Parameters<TaskStore["cancelTask"]>[1]][] = [
          [task.ref, { by: "", why }],
          [task.ref, { by: "   ", why }],
          [task.ref, { why } as unknown as { by: string; why: string }],
          [task.ref, { by: 42, why } as unknown as { by: string; why: string }],
          [
            { ...task.ref, taskId: "" },
            { by, why },
          ],
          [
            { ...task.ref, taskId: "a\u0000b" },
            { by, why },
          ],
          [
            { ...task.ref, taskId: "x".repeat(257) },
            { by, why },
          ],
          [
            { namespace: "", taskId: task.ref.taskId },
            { by, why },
          ],
        ];
        for (const [ref, ask] of bad)
          expect(await refusalCode(() => s.cancelTask(ref, ask))).toBe("ONCE_CANCEL_REFUSED");
        expect(frozen(await s.get(task.key(1)))).toEqual(frozen(record));
        expect((await s.readTask(task.ref)).cancellation).toBeUndefined();
        expect(
          expectOk(await s.heartbeat(task.key(1), owner.token, LONG_LEASE_MS)).cancelRequested,
        ).toBeUndefined();
        expect((await s.claim(request(task.key(2), { task: task.step(2) }))).outcome).toBe("acquired");
      });

      it("every claim racing a cancel is either stopped by it or refused: none is granted and missed", async () => {
        const s = tasks();
        if (!s) return;
        const task = newTask();
        const steps = Array.from({ length: 40 }, (_, n) => n);
        const claims = steps.map((n) => s.claim(request(task.key(n), { task: task.step(n) })));
        const cancel = s.cancelTask(task.ref, { by, why });
        const later = steps.map((n) => s.claim(request(task.key(n + 100), { task: task.step(n + 100) })));
        const [outcome, ...answers] = await Promise.all([cancel, ...claims, ...later]);
        expectCancelled(outcome as CancelOutcome);
        const { stopped } = outcome as CancelOutcome;
        const all = [...steps, ...steps.map((n) => n + 100)];
        all.forEach((n, i) => {
          const answer = answers[i] as ClaimOutcome;
          if (answer.outcome === "acquired") expect(stopped).toContain(task.key(n));
          else expect(answer.outcome).toBe("cancelled");
        });
        for (const n of all) {
          const record = await s.get(task.key(n));
          expect(record === undefined || record.state === "cancelled").toBe(true);
        }
        // After the cancel returned, nothing is granted.
        for (const n of all)
          expect((await s.claim(request(task.key(n), { task: task.step(n) }))).outcome).toBe("cancelled");
      });

      it("a cancelled task stays cancelled while claims keep coming: each refused claim refreshes its retention", async () => {
        const retentionMs = 800;
        const short = await setup({ retentionMs });
        try {
          const s = short.store;
          if (!isTaskStore(s)) return;
          const task = newTask();
          expectCancelled(await s.cancelTask(task.ref, { by, why }));
          // Refused claims 500 ms apart: each keeps the task's cancellation alive past the first 800 ms.
          for (let n = 0; n < 3; n++) {
            await sleep(500);
            expect((await s.claim(request(task.key(n), { task: task.step(n) }))).outcome).toBe("cancelled");
          }
          expect((await s.readTask(task.ref)).cancellation).toMatchObject({ by, why });
          await sleep(retentionMs + 250);
          expect((await s.readTask(task.ref)).cancellation).toBeUndefined();
          expect((await s.claim(request(task.key(7), { task: task.step(7) }))).outcome).toBe("acquired");
        } finally {
          await short.teardown();
        }
      });
    });

    describe("liveness (a LivenessStore)", () => {
      /** The store as a LivenessStore; a store without liveness entries skips these tests. */
      function liveness(): LivenessStore | undefined {
        return isLivenessStore(store) ? store : undefined;
      }

      /** A fresh liveness entry, opened as a process opens its own before its first claim. */
      async function entry(s: LivenessStore, ttlMs = LONG_LEASE_MS): Promise<string> {
        const id = randomBytes(8).toString("hex");
        expect(await s.openLiveness(id, ttlMs)).toBe(true);
        return id;
      }

      it("opens an entry only when absent, renews it while it lives, and never makes it again by a renew", async () => {
        const s = liveness();
        if (!s) return;
        const id = await entry(s, LEASE_MS);
        expect(await s.openLiveness(id, LEASE_MS)).toBe(false);
        expect(await s.renewLiveness(id, LEASE_MS)).toBe(true);
        await sleep(LEASE_MS + MARGIN_MS);
        expect(await s.renewLiveness(id, LEASE_MS)).toBe(false);
        const ended = await entry(s);
        await s.endLiveness(ended);
        expect(await s.renewLiveness(ended, LEASE_MS)).toBe(false);
      });

      it("a live entry keeps its owner's claim: the next claim is in flight for the lease", async () => {
        const s = liveness();
        if (!s) return;
        const key = randomKey();
        const id = await entry(s);
        await acquire(key, { liveness: id });
        const next = await s.claim(request(key));
        expect(next).toMatchObject({ outcome: "in_flight", state: "claimed", fence: 1 });
        expect(await s.get(key)).toMatchObject({ state: "claimed", fence: 1, liveness: id });
      });

      it("the owner's entry ended, prepare phase: the next claim takes over at once, fence + 1; the old owner is lost", async () => {
        const s = liveness();
        if (!s) return;
        const key = randomKey();
        const id = await entry(s);
        const first = await acquire(key, { liveness: id });
        await s.endLiveness(id);
        const second = owned(await s.claim(request(key)), "takeover");
        expect(second).toMatchObject({ fence: 2, claims: 2 });
        expect(await s.beginEffect(key, first.token)).toEqual({ outcome: "lost" });
        expect(await s.heartbeat(key, first.token, LONG_LEASE_MS)).toEqual({ outcome: "lost" });
        expect(await s.complete(key, first.token, '"late"')).toEqual({ outcome: "lost" });
        expect(await s.get(key)).toMatchObject({ state: "claimed", fence: 2, owner: second.token });
        expect((await s.get(key))?.liveness).toBeUndefined();
      });

      it("the owner's entry expired in the effect phase: reconcile at once, fence + 1; the zombie's writes are refused", async () => {
        const s = liveness();
        if (!s) return;
        const key = randomKey();
        const id = await entry(s, LEASE_MS);
        // The lease is long: only the entry running out can end this owner's claim so soon.
        const zombie = await acquire(key, { liveness: id, leaseMs: LONG_LEASE_MS });
        expectOk(await s.beginEffect(key, zombie.token));
        expect((await s.claim(request(key))).outcome).toBe("in_flight");
        await sleep(LEASE_MS + MARGIN_MS);
        const reconciler = owned(await s.claim(request(key)), "reconcile");
        expect(reconciler).toMatchObject({ from: "claimed", fence: 2 });
        // The zombie's lease has most of its time left, and it still cannot write.
        expect(await s.heartbeat(key, zombie.token, LONG_LEASE_MS)).toEqual({ outcome: "lost" });
        expect(await s.complete(key, zombie.token, '"twice"')).toEqual({ outcome: "lost" });
        expect(await s.markUnknown(key, zombie.token, timeout)).toEqual({ outcome: "lost" });
        expect(await s.renewLiveness(id, LONG_LEASE_MS)).toBe(false);
        expectOk(await s.resolveApplied(key, reconciler.token, '"charged"'));
        expect(await s.claim(request(key))).toMatchObject({
          outcome: "replay",
          result: '"charged"',
          fence: 2,
        });
      });

      it("a reconciler whose entry is gone is reconciled again at once, from reconciling", async () => {
        const s = liveness();
        if (!s) return;
        const { key } = await unknownKey();
        const id = await entry(s);
        const reconciler = owned(await s.claim(request(key, { liveness: id })), "reconcile");
        await s.endLiveness(id);
        const next = owned(await s.claim(request(key)), "reconcile");
        expect(next).toMatchObject({ from: "reconciling", fence: reconciler.fence + 1 });
        expect(await s.giveUp(key, reconciler.token, timeout)).toEqual({ outcome: "lost" });
      });

      it("the claim that takes over names its own entry, or none: a former owner's entry no longer counts", async () => {
        const s = liveness();
        if (!s) return;
        const key = randomKey();
        const a = await entry(s);
        const b = await entry(s);
        await acquire(key, { liveness: a });
        await s.endLiveness(a);
        const second = owned(await s.claim(request(key, { liveness: b })), "takeover");
        expect(await s.get(key)).toMatchObject({ owner: second.token, liveness: b });
        // b is alive: the claim holds, whatever happened to a.
        expect((await s.claim(request(key))).outcome).toBe("in_flight");
        await s.endLiveness(b);
        const third = owned(await s.claim(request(key)), "takeover");
        expect(third.fence).toBe(3);
        // The third owner named no entry: only its lease says it is alive.
        expect((await s.claim(request(key))).outcome).toBe("in_flight");
      });

      it("an entry gone changes nothing on a settled record, nor on a claim without an entry", async () => {
        const s = liveness();
        if (!s) return;
        const id = await entry(s);
        const done = randomKey();
        const owner = await acquire(done, { liveness: id, phase: "effect" });
        expectOk(await s.complete(done, owner.token, '"ok"'));
        const unnamed = randomKey();
        await acquire(unnamed);
        await s.endLiveness(id);
        expect(await s.claim(request(done))).toMatchObject({ outcome: "replay", result: '"ok"', fence: 1 });
        expect(await s.claim(request(unnamed))).toMatchObject({ outcome: "in_flight", fence: 1 });
      });

      it("the owner's entry gone after its task was cancelled mid-effect: a claim of the task is cancelled, not reconciled", async () => {
        const s = liveness();
        if (!s || !isTaskStore(s)) return;
        const taskId = `task-${randomKey().slice(0, 12)}`;
        const step: TaskIdentity = { namespace: "default", taskId, stepId: "charge" };
        const key = deriveKey(step);
        const id = await entry(s);
        const owner = await acquire(key, { liveness: id, task: step });
        expectOk(await s.beginEffect(key, owner.token));
        expect((await s.cancelTask({ taskId }, { by: "ops", why: "withdrawn" })).running).toEqual([key]);
        await s.endLiveness(id);
        expect(await s.claim(request(key, { task: step }))).toMatchObject({ outcome: "cancelled" });
        expect(await s.get(key)).toMatchObject({ state: "claimed", fence: 1, owner: owner.token });
      });

      it("an in-flight caller is told to come back no later than the owner's entry runs out", async () => {
        const s = liveness();
        if (!s) return;
        const key = randomKey();
        const id = await entry(s, 1_000);
        await acquire(key, { liveness: id, leaseMs: LONG_LEASE_MS });
        const next = await s.claim(request(key));
        if (next.outcome !== "in_flight") throw new Error(`expected in_flight, got ${JSON.stringify(next)}`);
        expect(next.retryAfterMs).toBeLessThanOrEqual(1_000);
      });
    });

    describe("retention", () => {
      it("expires the whole record after the retention, and refreshes it on every transition", async () => {
        const retentionMs = 600;
        const short = await setup({ retentionMs });
        try {
          expect(short.retentionMs).toBe(retentionMs);
          expect(short.store.retentionMs).toBe(retentionMs);
          const s = short.store;
          const key = randomKey();
          const owner = owned(await s.claim(request(key, { leaseMs: 5_000 })), "acquired");
          // Three transitions 300 ms apart: each refreshes retention, so the record outlives 600 ms.
          await sleep(300);
          expectOk(await s.heartbeat(key, owner.token, 5_000));
          await sleep(300);
          expectOk(await s.beginEffect(key, owner.token));
          await sleep(300);
          expectOk(await s.complete(key, owner.token, '"kept"'));
          const record = await s.get(key);
          expect(record?.state).toBe("done");
          expect(record?.ttlMs).toBeLessThanOrEqual(retentionMs);

          await sleep(retentionMs + 250);
          expect(await s.get(key)).toBeUndefined();
          // Gone means gone: the next claim starts over.
          expect(await s.claim(request(key))).toMatchObject({ outcome: "acquired", fence: 1, claims: 1 });
        } finally {
          await short.teardown();
        }
      });

      it("does not let a lookup or a refused write extend the retention", async () => {
        const retentionMs = 2_000;
        const short = await setup({ retentionMs });
        try {
          const s = short.store;
          const key = randomKey();
          const owner = owned(await s.claim(request(key)), "acquired");
          expectOk(await s.beginEffect(key, owner.token));
          // The time left may only shrink: compared, not timed, so a slow machine cannot blur it.
          let left = (await s.get(key))?.ttlMs ?? 0;
          for (let i = 0; i < 2; i++) {
            await sleep(100);
            expect((await s.release(key, owner.token)).outcome).toBe("refused");
            expect((await s.claim(request(key))).outcome).toBe("in_flight");
            const now = (await s.get(key))?.ttlMs ?? Number.POSITIVE_INFINITY;
            expect(now).toBeLessThan(left);
            left = now;
          }
          await sleep(left + 250);
          expect(await s.get(key)).toBeUndefined();
        } finally {
          await short.teardown();
        }
      });
    });
  });
}
