// The AI SDK's loop stopped on a charge that waits for approval, in an orchestrator process SIGKILLed while the
// request is pending (test/approval-process.ts), then restarted, approved by the operator on the record, and
// resumed by two processes at once: one request in all, and one charge at the payments stand-in.

import path from "node:path";
import { fileURLToPath } from "node:url";
import type { PendingApproval } from "@once/agent";
import { PaymentsClient } from "@once/payments";
import { RedisOperatorStore } from "@once/redis";
import { describeRun, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentProcessConfig } from "../../../test/support/agent-child.js";
import {
  type ApprovalChildEvent,
  approvalChild,
  approveThenResumeTwice,
} from "../../../test/support/approval-crash.js";
import { payments, prefix, store, useAgentWorld } from "./agent-world.js";

useAgentWorld("ai-approval-crash");

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

interface ChildEvent extends ApprovalChildEvent {
  request?: PendingApproval;
}

const runChild = approvalChild<ChildEvent>(packageRoot);

let redis: Redis;
let operator: RedisOperatorStore;
beforeAll(() => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  operator = new RedisOperatorStore({ redis, prefix });
});
afterAll(() => redis.disconnect());

describe("an AI SDK orchestrator whose charge waits for approval, SIGKILLed while it waits", () => {
  it("restarted: the same one request; approved by the operator, two resumes at once charge once", async () => {
    const orderId = `order-approval-${process.pid}`;
    const config: AgentProcessConfig = {
      redisUrl: redisUrl(),
      prefix,
      paymentsUrl: payments.url,
      taskId: `task-${orderId}`,
      orderId,
      leaseMs: 1_000,
    };
    const client = new PaymentsClient(payments.url);

    const crashed = await runChild({ ...config, killAt: "approval-requested" });
    expect(crashed.run.signal, describeRun(crashed.run)).toBe("SIGKILL");
    const asked = crashed.find("approval-requested")?.request;
    if (!asked) throw new Error(`no approval request: ${describeRun(crashed.run)}`);
    expect(asked.tool).toBe("charge_customer");
    expect(await client.findCharges({ orderId })).toHaveLength(0);
    const requested = await store.get(asked.key);
    expect(requested).toMatchObject({ state: "awaiting_approval", approval: { reason: asked.reason } });

    // Restarted from the task's first message: the recorded turns are replayed, and the record answers the
    // request it holds — the same one, not a second — and nothing is charged.
    const restarted = await runChild(config);
    expect(restarted.run.code, describeRun(restarted.run)).toBe(0);
    expect(restarted.modelCalls).toEqual([]);
    expect(restarted.find("approval-requested")?.request).toEqual(asked);
    expect(await store.get(asked.key)).toMatchObject({
      state: "awaiting_approval",
      fence: requested?.fence,
      approval: { requestedAt: asked.requestedAt, expiresAt: asked.expiresAt },
    });
    expect(await client.findCharges({ orderId })).toHaveLength(0);

    const { a, b, charges } = await approveThenResumeTwice({
      operator,
      store,
      paymentsUrl: payments.url,
      orderId,
      key: asked.key,
      resume: () => runChild({ ...config, together: 2 }),
    });
    expect(a?.steps).toEqual(b?.steps);
    const chargeCall = a?.steps?.[1]?.find((c) => c.tool === "charge_customer");
    expect(chargeCall?.input.amount).toBe(charges[0]?.amount);
  }, 120_000);
});
