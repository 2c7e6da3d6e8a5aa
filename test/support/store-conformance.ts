// The one conformance suite every OnceStore runs: each transition of the record's state machine and each
// claim outcome of /work/shared/DESIGN.md, against a real store. MemoryStore is the reference; a store that
// passes this suite behaves like it.
//
// Only types come from @once/core (by relative path, erased at run time), so any package can import this
// file by relative path without depending on how the workspace links packages.

import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type {
  ClaimOutcome,
  ClaimRequest,
  OnceRecord,
  OnceStore,
  Ownership,
  StoredError,
  WriteOutcome,
} from "../../packages/core/src/index.js";

/** A store under test, the retention it was built with, and how to clean up after it. */
export interface StoreFixture {
  store: OnceStore;
  retentionMs: number;
  teardown(): Promise<void>;
}

export interface StoreSetupOptions {
  /** Build the store with this retention instead of its usual one (the retention tests use a short one). */
  retentionMs?: number;
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

const declined: StoredError = { name: "CardDeclinedError", message: "card declined", code: "card_declined" };
const timeout: StoredError = { name: "SocketTimeoutError", message: "socket timed out after the request" };

/** Runs the conformance suite against the store `setup` builds. */
export function describeStoreConformance(name: string, setup: StoreSetup): void {
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
