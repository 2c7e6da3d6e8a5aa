// Approvals through BullMQ, with real worker processes and a real HTTP provider: a call over the limit is
// claimed and asked about once, whatever is killed or re-sent; a decision is one fenced transition of its record,
// so an approve racing a deny has one winner, and an approval followed by two concurrent resumes charges once.

import {
  ApprovalPendingError,
  type ApprovalStore,
  DecisionRefusedError,
  deriveKey,
  ReplayedFailureError,
} from "@once/core";
import { PostgresOperatorStore, PostgresStore } from "@once/postgres";
import { RedisOperatorStore } from "@once/redis";
import { postgresUrl, randomSchema } from "@once/support";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { withScenario } from "./scenario.js";

const APPROVAL_WORKER = { tools: ["charge_customer_approved" as const] };

describe("approvals through BullMQ workers", () => {
  it("a worker SIGKILLed while a request is pending: every resume gets the same pending answer, asked once; approved, two concurrent resumes charge once", () =>
    withScenario({ label: "approval-killed" }, async (s) => {
      const first = await s.startWorker(APPROVAL_WORKER, "first");
      const tools = [s.tools.chargeCustomerApproved];
      const dispatcher = await s.dispatcher({ tools });
      const step = { taskId: "task-approve", stepId: "charge-1" };
      const input = { orderId: "order_ap1", amount: 250 };
      const key = s.key(step.taskId, step.stepId);

      const asked = await dispatcher
        .call(s.tools.chargeCustomerApproved, input, step)
        .catch((e: unknown) => e);
      expect(asked).toBeInstanceOf(ApprovalPendingError);
      expect(asked).toMatchObject({
        key,
        tool: "charge_customer_approved",
        reason: "amount 250 is over 100",
      });
      const requested = await first.waitFor("approval-requested");
      expect(requested).toMatchObject({ key, reason: "amount 250 is over 100" });
      expect((await s.record(step.taskId, step.stepId))?.state).toBe("awaiting_approval");

      // The worker dies with the request pending; another takes its place, and the task is re-sent twice.
      await first.kill("SIGKILL");
      const second = await s.startWorker(APPROVAL_WORKER, "second");
      const resent = await s.dispatcher({ tools });
      for (const d of [dispatcher, resent]) {
        const again = await d.call(s.tools.chargeCustomerApproved, input, step).catch((e: unknown) => e);
        expect(again).toBeInstanceOf(ApprovalPendingError);
        expect((again as ApprovalPendingError).expiresAt).toBe((asked as ApprovalPendingError).expiresAt);
      }
      expect(s.charges().total).toBe(0);

      const operator = new RedisOperatorStore({ redis: s.redis, prefix: s.storePrefix });
      await operator.approve(key, { by: "alice", why: "customer confirmed" });
      const [a, b] = await Promise.all([
        dispatcher.call(s.tools.chargeCustomerApproved, input, step),
        resent.call(s.tools.chargeCustomerApproved, input, step),
      ]);
      expect(a.result).toEqual(b.result);
      const charges = s.charges();
      expect(charges.total).toBe(1);
      expect(charges.duplicates).toBe(0);
      expect(second.all("run-entered")).toHaveLength(1);
      // Asked once: neither the restarted worker nor the runs after the decision asked again.
      expect(second.all("approval-requested")).toHaveLength(0);
      expect(first.all("approval-requested")).toHaveLength(1);
      expect(await s.record(step.taskId, step.stepId)).toMatchObject({
        state: "done",
        approval: { decision: { as: "approved", by: "alice" } },
      });
      // Later calls replay; a call under the limit never asks.
      expect((await dispatcher.call(s.tools.chargeCustomerApproved, input, step)).replayed).toBe(true);
      const small = await dispatcher.call(
        s.tools.chargeCustomerApproved,
        { orderId: "order_ap2", amount: 50 },
        { taskId: "task-approve", stepId: "charge-2" },
      );
      expect(small.result.amount).toBe(50);
      expect(second.all("approval-requested")).toHaveLength(0);
    }));

  it("a denied call fails for good (denied) for every caller; nothing is charged", () =>
    withScenario({ label: "approval-denied" }, async (s) => {
      await s.startWorker(APPROVAL_WORKER);
      const dispatcher = await s.dispatcher({ tools: [s.tools.chargeCustomerApproved] });
      const step = { taskId: "task-deny", stepId: "charge-1" };
      const input = { orderId: "order_dn1", amount: 500 };
      await expect(dispatcher.call(s.tools.chargeCustomerApproved, input, step)).rejects.toBeInstanceOf(
        ApprovalPendingError,
      );
      const operator = new RedisOperatorStore({ redis: s.redis, prefix: s.storePrefix });
      await operator.deny(s.key(step.taskId, step.stepId), { by: "bob", why: "over the refund limit" });
      for (let i = 0; i < 2; i++) {
        const error = await dispatcher
          .call(s.tools.chargeCustomerApproved, input, step)
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ReplayedFailureError);
        expect((error as ReplayedFailureError).stored).toMatchObject({
          code: "denied",
          message: "denied by bob: over the refund limit",
        });
      }
      expect(s.charges().total).toBe(0);
    }));
});

describe("an approve racing a deny: exactly one wins", () => {
  async function race(store: ApprovalStore, operator: RedisOperatorStore | PostgresOperatorStore) {
    const outcomes: string[] = [];
    for (let i = 0; i < 20; i++) {
      const key = deriveKey({ taskId: "race", stepId: `step-${i}-${Math.random()}` });
      const claim = await store.claim({
        key,
        fingerprint: "fp",
        tool: "refund",
        phase: "prepare",
        leaseMs: 10_000,
      });
      if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
      await store.requestApproval(key, claim.token, { reason: "refund", ttlMs: 60_000 });
      const [approve, deny] = await Promise.allSettled([
        operator.approve(key, { by: "alice", why: "ok" }),
        operator.deny(key, { by: "bob", why: "no" }),
      ]);
      const won = [approve, deny].filter((r) => r.status === "fulfilled");
      expect(won).toHaveLength(1);
      const lost = [approve, deny].find((r) => r.status === "rejected") as PromiseRejectedResult;
      expect(lost.reason).toBeInstanceOf(DecisionRefusedError);
      const record = await store.get(key);
      const winner = approve.status === "fulfilled" ? "approved" : "denied";
      expect(record?.approval?.decision?.as).toBe(winner);
      expect(record?.state).toBe(winner === "approved" ? "approved" : "failed");
      outcomes.push(winner);
    }
    return outcomes;
  }

  it("on Redis", () =>
    withScenario({ label: "approval-race" }, async (s) => {
      const outcomes = await race(s.store, new RedisOperatorStore({ redis: s.redis, prefix: s.storePrefix }));
      expect(outcomes).toHaveLength(20);
    }));

  it("on PostgreSQL", async () => {
    const pool = new pg.Pool({ connectionString: postgresUrl(), max: 6 });
    const schema = randomSchema("approval_race");
    try {
      const store = await PostgresStore.create({ pool, schema });
      const outcomes = await race(store, await PostgresOperatorStore.create({ pool, schema }));
      expect(outcomes).toHaveLength(20);
    } finally {
      await pool.query(`drop schema if exists "${schema}" cascade`);
      await pool.end();
    }
  });
});
