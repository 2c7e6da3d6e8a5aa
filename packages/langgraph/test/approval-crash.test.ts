// A LangGraph graph (StateGraph + ToolNode on a PostgresSaver) interrupted on a charge that waits for approval,
// in an orchestrator process SIGKILLed while the request is pending (test/approval-process.ts), then restarted
// and resumed with the app's own "approved" (the same one request, nothing charged), approved by the operator
// on the record, and resumed by two processes at once: one request in all, and one charge at the payments
// stand-in.

import path from "node:path";
import { fileURLToPath } from "node:url";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
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
import type { ApprovalInterrupt } from "../src/index.js";
import type { GraphProcessConfig } from "./agent-process.js";
import { payments, prefix, store, useAgentWorld } from "./agent-world.js";

useAgentWorld("lg-approval-crash");

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const schema = randomSchema("lg-approval");
const settings: GraphProcessConfig = {
  graph: "react",
  durability: "sync",
  postgres: { url: postgresUrl(), schema },
};

interface ChildEvent extends ApprovalChildEvent {
  started?: boolean;
  request?: ApprovalInterrupt;
  interrupts?: number;
}

const runApprovalChild = approvalChild<ChildEvent>(packageRoot);
const runChild = (config: AgentProcessConfig) =>
  runApprovalChild(config, { ONCE_LANGGRAPH: JSON.stringify(settings) });

let redis: Redis;
let operator: RedisOperatorStore;
beforeAll(async () => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  operator = new RedisOperatorStore({ redis, prefix });
  const saver = PostgresSaver.fromConnString(postgresUrl(), { schema });
  await saver.setup();
  await saver.end();
});
afterAll(async () => {
  redis.disconnect();
  const client = new pg.Client({ connectionString: postgresUrl() });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
});

describe("a LangGraph orchestrator interrupted on a charge that waits for approval, SIGKILLed while it waits", () => {
  it("restarted and resumed: the same one request; approved by the operator, two resumes at once charge once", async () => {
    const orderId = `order-lg-approval-${process.pid}`;
    const config: AgentProcessConfig = {
      redisUrl: redisUrl(),
      prefix,
      paymentsUrl: payments.url,
      taskId: `thread-${orderId}`,
      orderId,
      leaseMs: 1_000,
    };
    const client = new PaymentsClient(payments.url);

    const crashed = await runChild({ ...config, killAt: "approval-requested" });
    expect(crashed.run.signal, describeRun(crashed.run)).toBe("SIGKILL");
    const asked = crashed.find("approval-requested")?.request;
    if (!asked) throw new Error(`no interrupt: ${describeRun(crashed.run)}`);
    expect(asked).toMatchObject({ once: "ONCE_APPROVAL_PENDING", tool: "charge_customer" });
    expect(crashed.modelCalls).toEqual([0, 1]);
    expect(await client.findCharges({ orderId })).toHaveLength(0);
    const requested = await store.get(asked.key);
    expect(requested).toMatchObject({ state: "awaiting_approval", approval: { reason: asked.reason } });

    // Restarted, the thread resumed from its checkpoint with the app's "approved": the record still awaits a
    // person, so the graph interrupts again with the same request — not a second one — and nothing is charged.
    const restarted = await runChild(config);
    expect(restarted.run.code, describeRun(restarted.run)).toBe(0);
    expect(restarted.find("resuming")?.started).toBe(true);
    expect(restarted.modelCalls).toEqual([]);
    expect(restarted.find("approval-requested")).toMatchObject({ request: asked, interrupts: 1 });
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
    expect(b?.answer).toBe(`order ${orderId} is paid`);
    expect(a?.steps).toEqual(b?.steps);
    const chargeCall = a?.steps?.[1]?.find((c) => c.tool === "charge_customer");
    expect(chargeCall?.input.amount).toBe(charges[0]?.amount);
  }, 120_000);
});
