// Mastra's Agent on a PostgresStore, suspended on a charge that waits for approval, in an orchestrator process
// SIGKILLed while the request is pending (test/approval-process.ts), then restarted and resumed with Mastra's
// own approveToolCall (the same one request, nothing charged), approved by the operator on the record, and
// resumed by two processes at once: one request in all, and one charge at the payments stand-in.

import path from "node:path";
import { fileURLToPath } from "node:url";
import { PostgresStore } from "@mastra/pg";
import type { PendingApproval } from "@once/agent";
import { PaymentsClient } from "@once/payments";
import { RedisOperatorStore } from "@once/redis";
import { describeRun, postgresUrl, randomSchema, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentProcessConfig } from "../../../test/support/agent-child.js";
import {
  type ApprovalChildEvent,
  approvalChild,
  approveThenResumeTwice,
} from "../../../test/support/approval-crash.js";
import { payments, prefix, store, useAgentWorld } from "./agent-world.js";
import type { MastraApprovalConfig } from "./approval-process.js";

useAgentWorld("mastra-approval-crash");

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const schema = randomSchema("mastra-approval-crash");

interface ChildEvent extends ApprovalChildEvent {
  toolCallId?: string;
  request?: PendingApproval;
}

const runApprovalChild = approvalChild<ChildEvent>(packageRoot);
function runChild(config: AgentProcessConfig, action: MastraApprovalConfig["action"]) {
  const settings: MastraApprovalConfig = { postgres: { url: postgresUrl(), schema }, action };
  return runApprovalChild(config, { ONCE_MASTRA_APPROVAL: JSON.stringify(settings) });
}

let redis: Redis;
let operator: RedisOperatorStore;
beforeAll(async () => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  operator = new RedisOperatorStore({ redis, prefix });
  // Mastra creates its tables on first use; once here, so two processes starting together do not race for it.
  const storage = new PostgresStore({ id: "once-test", connectionString: postgresUrl(), schemaName: schema });
  await storage.init();
  await storage.close();
});
afterAll(async () => {
  redis.disconnect();
  const client = new pg.Client({ connectionString: postgresUrl() });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
});

describe("a Mastra orchestrator suspended on a charge that waits for approval, SIGKILLed while it waits", () => {
  it("restarted and resumed: the same one request; approved by the operator, two resumes at once charge once", async () => {
    const orderId = `order-mastra-approval-${process.pid}`;
    const config: AgentProcessConfig = {
      redisUrl: redisUrl(),
      prefix,
      paymentsUrl: payments.url,
      taskId: `run-${orderId}`,
      orderId,
      leaseMs: 1_000,
    };
    const client = new PaymentsClient(payments.url);

    const crashed = await runChild({ ...config, killAt: "approval-requested" }, "start");
    expect(crashed.run.signal, describeRun(crashed.run)).toBe("SIGKILL");
    const suspended = crashed.find("approval-requested");
    const asked = suspended?.request;
    if (!asked) throw new Error(`no approval request: ${describeRun(crashed.run)}`);
    expect(asked.tool).toBe("charge_customer");
    expect(crashed.modelCalls).toEqual([0, 1]);
    expect(await client.findCharges({ orderId })).toHaveLength(0);
    const requested = await store.get(asked.key);
    expect(requested).toMatchObject({ state: "awaiting_approval", approval: { reason: asked.reason } });

    // Restarted, Mastra's suspended run resumed with its own approval: the record still awaits a person, so the
    // run suspends again for the same call with the same request — not a second one — and nothing is charged.
    const restarted = await runChild(config, "approve");
    expect(restarted.run.code, describeRun(restarted.run)).toBe(0);
    expect(restarted.modelCalls).toEqual([]);
    expect(restarted.find("approval-requested")).toMatchObject({
      toolCallId: suspended.toolCallId,
      request: asked,
    });
    expect(await store.get(asked.key)).toMatchObject({
      state: "awaiting_approval",
      fence: requested?.fence,
      approval: { requestedAt: asked.requestedAt, expiresAt: asked.expiresAt },
    });
    expect(await client.findCharges({ orderId })).toHaveLength(0);

    const { b } = await approveThenResumeTwice({
      operator,
      store,
      paymentsUrl: payments.url,
      orderId,
      key: asked.key,
      resume: () => runChild({ ...config, together: 2 }, "approve"),
    });
    expect(b?.answer).toBe(`order ${orderId} is paid`);
  }, 120_000);
});
