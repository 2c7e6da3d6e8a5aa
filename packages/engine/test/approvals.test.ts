// The engine's side of approvals, run in process on a real Redis: the policy decides before anything of the
// tool runs, a policy that fails closes the call, the request is made and told about once across callers, and
// its wait counts into the retry window.

import {
  APPROVAL_EXPIRED,
  ApprovalPendingError,
  ApprovalPolicyError,
  ApprovalStoreError,
  defineTool,
  deriveKey,
  ReplayedFailureError,
} from "@once/core";
import { RedisOperatorStore, RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { type ApprovalRequested, InProcess } from "../src/index.js";

type RefundPolicy = true | ((input: { amount: number }) => string | undefined | null);

let redis: Redis;
let store: RedisStore;
let operator: RedisOperatorStore;
const prefix = randomPrefix("approvals");

beforeAll(async () => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  store = await RedisStore.create({ redis, prefix });
  operator = new RedisOperatorStore({ redis, prefix });
});

afterAll(async () => {
  await cleanupPrefix(redis, prefix);
  redis.disconnect();
});

/** A refund tool whose every run and prepare is counted: nothing may start while a call waits. */
function refundTool(policy: RefundPolicy) {
  const counts = { prepared: 0, ran: 0 };
  const tool = defineTool({
    name: "refund",
    kind: "effect",
    input: z.object({ amount: z.number() }),
    output: z.object({ refunded: z.number() }),
    approval: policy as never,
    prepare: () => {
      counts.prepared++;
    },
    run: (input) => {
      counts.ran++;
      return { refunded: input.amount };
    },
  });
  return { tool, counts };
}

let steps = 0;
const step = () => ({ taskId: "task-approvals", stepId: `refund-${++steps}` });

describe("approvals in process", () => {
  it("asks once per call across callers; every caller gets the pending answer; approved, it runs once", async () => {
    const { tool, counts } = refundTool((input: { amount: number }) =>
      input.amount > 100 ? `refund of ${input.amount} is over 100` : undefined,
    );
    const told: ApprovalRequested[] = [];
    const onApprovalRequested = (request: ApprovalRequested) => {
      told.push(request);
    };
    // Two callers, as two processes would be: each with its own entry point on the same store.
    const a = new InProcess({ store, tools: [tool], onApprovalRequested });
    const b = new InProcess({ store, tools: [tool], onApprovalRequested });
    const s = step();
    const [first, second] = await Promise.allSettled([
      a.call(tool, { amount: 250 }, s),
      b.call(tool, { amount: 250 }, s),
    ]);
    for (const answer of [first, second]) {
      expect(answer.status).toBe("rejected");
      const error = (answer as PromiseRejectedResult).reason;
      expect(error).toBeInstanceOf(ApprovalPendingError);
      expect(error).toMatchObject({ tool: "refund", reason: "refund of 250 is over 100" });
    }
    await expect(a.call(tool, { amount: 250 }, s)).rejects.toBeInstanceOf(ApprovalPendingError);
    expect(told).toHaveLength(1);
    expect(told[0]).toMatchObject({
      tool: "refund",
      taskId: s.taskId,
      stepId: s.stepId,
      reason: "refund of 250 is over 100",
    });
    expect(counts).toEqual({ prepared: 0, ran: 0 });

    const key = told[0]?.key ?? "";
    await operator.approve(key, { by: "alice", why: "ok", fingerprint: told[0]?.fingerprint ?? "" });
    expect((await b.call(tool, { amount: 250 }, s)).result).toEqual({ refunded: 250 });
    expect((await a.call(tool, { amount: 250 }, s)).replayed).toBe(true);
    expect(counts).toEqual({ prepared: 1, ran: 1 });
    expect(told).toHaveLength(1);

    // Under the limit: no question, it runs at once.
    expect((await a.call(tool, { amount: 20 }, step())).result).toEqual({ refunded: 20 });
  });

  it("approval: true asks for every call; denied, every retry replays the denial", async () => {
    const { tool, counts } = refundTool(true);
    const runner = new InProcess({ store, tools: [tool] });
    const s = step();
    const pending = await runner.call(tool, { amount: 1 }, s).catch((e: unknown) => e);
    expect(pending).toBeInstanceOf(ApprovalPendingError);
    await operator.deny((pending as ApprovalPendingError).key, { by: "bob", why: "no" });
    for (let i = 0; i < 2; i++) {
      const error = await runner.call(tool, { amount: 1 }, s).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ReplayedFailureError);
      expect((error as ReplayedFailureError).stored.code).toBe("denied");
    }
    expect(counts.ran).toBe(0);
  });

  it("a request nobody decides expires: the call fails for good with approval_expired", async () => {
    const { tool, counts } = refundTool(true);
    const runner = new InProcess({ store, tools: [tool], approvalTtlMs: 200 });
    const s = step();
    await expect(runner.call(tool, { amount: 1 }, s)).rejects.toBeInstanceOf(ApprovalPendingError);
    await new Promise((resolve) => setTimeout(resolve, 350));
    for (let i = 0; i < 2; i++) {
      const error = await runner.call(tool, { amount: 1 }, s).catch((e: unknown) => e);
      expect((error as ReplayedFailureError).stored?.code).toBe(APPROVAL_EXPIRED);
    }
    expect(counts.ran).toBe(0);
  });

  it("a policy that throws or answers nonsense fails closed: nothing ran, the key is handed back", async () => {
    for (const policy of [
      () => {
        throw new TypeError("limits service down");
      },
      () => 42 as never,
      () => "",
    ]) {
      const { tool, counts } = refundTool(policy);
      const runner = new InProcess({ store, tools: [tool], attempts: 3, backoffMs: 1 });
      const s = step();
      const error = await runner.call(tool, { amount: 500 }, s).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ApprovalPolicyError);
      expect((error as Error).message).toMatch(
        /^the approval policy of refund failed, so the call was refused/,
      );
      expect(counts).toEqual({ prepared: 0, ran: 0 });
      expect((await store.get(deriveKey(s)))?.state).toBe("released");
    }
  });

  it("counts the request's wait into the retry window, and refuses a store without approvals", () => {
    const { tool } = refundTool(true);
    const runner = new InProcess({ store, tools: [tool], approvalTtlMs: 120_000 });
    expect(runner.retryWindow.terms).toContainEqual(
      expect.objectContaining({ name: "approvalTtl", ms: 120_000 }),
    );
    const plain = { ...store, retentionMs: store.retentionMs, claim: store.claim.bind(store) } as never;
    expect(() => new InProcess({ store: plain, tools: [tool] })).toThrow(ApprovalStoreError);
  });
});
