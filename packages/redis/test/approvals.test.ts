// Approvals on Redis beyond the conformance suite: how the record keeps a request (layout 4, only on records
// asked about; 5 on one that keeps its task), and the operator's approve / deny through RedisOperatorStore —
// fenced, bound to the fingerprint, refused with a named error and the record unchanged.

import { randomBytes } from "node:crypto";
import { type ClaimRequest, DecisionRefusedError, OnceError } from "@once/core";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RECORD_LAYOUT, RedisOperatorStore, RedisStore } from "../src/index.js";
import { storedRecord } from "./support/stored-record.js";

const RETENTION_MS = 10 * 60 * 1000;
const prefix = randomPrefix("approvals");
let redis: Redis;
let store: RedisStore;
let operator: RedisOperatorStore;

beforeAll(async () => {
  redis = new Redis(redisUrl());
  store = await RedisStore.create({ redis, prefix, retentionMs: RETENTION_MS });
  operator = new RedisOperatorStore({ redis, prefix });
});

afterAll(async () => {
  await cleanupPrefix(redis, prefix);
  await redis.quit();
});

function request(key: string, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return { key, fingerprint: "fp-a", tool: "charge_card", phase: "prepare", leaseMs: 10_000, ...overrides };
}

async function pending(): Promise<string> {
  const key = randomBytes(32).toString("hex");
  const claim = await store.claim(request(key));
  if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
  const asked = await store.requestApproval(key, claim.token, { reason: "over 100", ttlMs: 60_000 });
  expect(asked.outcome).toBe("ok");
  return key;
}

describe("approvals on Redis", () => {
  it("keeps the request on the record, with no owner, and a retention from the request", async () => {
    const key = await pending();
    const stored = await storedRecord(redis, prefix + key);
    expect(stored).toMatchObject({
      layout: RECORD_LAYOUT,
      fields: { state: "awaiting_approval", apr_reason: "over 100" },
    });
    expect(stored?.fields.owner).toBeUndefined();
    expect(Number(stored?.fields.apr_until) - Number(stored?.fields.apr_at)).toBe(60_000);
    const ttl = await redis.pttl(prefix + key);
    expect(ttl).toBeGreaterThan(RETENTION_MS - 60_000);
  });

  it("approve through the operator store: fenced on the record read, who/why kept, the next claim approved", async () => {
    const key = await pending();
    const before = await operator.get(key);
    const decided = await operator.approve(key, { by: "alice", why: "customer called" });
    expect(decided.fence).toBe((before?.fence ?? 0) + 1);
    expect(decided.record).toMatchObject({
      state: "approved",
      approval: { reason: "over 100", decision: { as: "approved", by: "alice", why: "customer called" } },
    });
    expect(await store.claim(request(key))).toMatchObject({ outcome: "acquired", approved: true });
  });

  it("refuses, with DecisionRefusedError and the record unchanged: no key, no by, another fingerprint or fence, decided", async () => {
    const refused = async (key: string, run: () => Promise<unknown>, reason: RegExp) => {
      const before = await redis.dumpBuffer(prefix + key);
      const error = await run().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(OnceError.is(error, "ONCE_DECISION_REFUSED")).toBe(true);
      expect(error).toBeInstanceOf(DecisionRefusedError);
      expect((error as Error).message).toMatch(reason);
      expect(await redis.dumpBuffer(prefix + key)).toEqual(before);
    };
    const missing = randomBytes(32).toString("hex");
    await refused(missing, () => operator.approve(missing, { by: "alice" }), /no record for this key/);

    const key = await pending();
    const record = await operator.get(key);
    await refused(key, () => operator.approve(key, { by: "" }), /say who decides/);
    await refused(key, () => operator.deny(key, { by: "bob", fingerprint: "fp-b" }), /not the record's/);
    await refused(
      key,
      () => operator.deny(key, { by: "bob", expectFence: (record?.fence ?? 0) + 1 }),
      /moved on/,
    );
    // The store itself binds the write: a stale fence that got past the look is refused by the script.
    expect(
      await store.decide(key, {
        decision: "approved",
        by: "x",
        why: "",
        expectFence: record?.fence ?? 0,
        fingerprint: "fp-b",
      }),
    ).toMatchObject({ outcome: "refused" });

    await operator.deny(key, { by: "bob", why: "over the limit" });
    await refused(key, () => operator.approve(key, { by: "alice" }), /already denied by bob/);
    expect(await store.claim(request(key))).toMatchObject({
      outcome: "replay_error",
      error: { code: "denied", message: "denied by bob: over the limit" },
    });
  });
});
