// onceStep in Mastra's own workflow runner, in this process: the step is a step of the run's task, so a cancel
// of the run stops it, and a run started again with the same runId replays it.

import { createWorkflow } from "@mastra/core/workflows";
import { AgentTask } from "@once/agent";
import { type AnyTool, InvalidKeyPartError } from "@once/core";
import { hookedOrderAgentTools, MemoryOrderBook, pendingOrder } from "@once/order-agent";
import { PaymentsClient } from "@once/payments";
import { describe, expect, it } from "vitest";
import { onceStep } from "../src/index.js";
import { payments, store, useAgentWorld } from "./agent-world.js";

useAgentWorld("mastra-step");

let serial = 0;
const newOrder = () => `order-${process.pid}-${++serial}`;

async function chargeTool(orderId: string) {
  const orders = new MemoryOrderBook();
  await orders.create(pendingOrder(orderId));
  return hookedOrderAgentTools(payments.url, orders).chargeCustomer;
}

async function charges(orderId: string) {
  return (await new PaymentsClient(payments.url).findCharges({ orderId })).length;
}

/** A workflow of one once step, the charge; started as a run with the given id and input. */
async function runCharge(charge: AnyTool, runId: string, inputData: unknown) {
  const workflow = createWorkflow({
    id: "charge-order",
    inputSchema: charge.input,
    outputSchema: charge.output,
  })
    .then(onceStep(charge, { store }))
    .commit();
  const run = await workflow.createRun({ runId });
  return run.start({ inputData: inputData as never });
}

/** A failed run's error: Mastra keeps the step's error as an Error or as its serialized fields. */
function failureOf(result: Awaited<ReturnType<typeof runCharge>>): { code?: string; message: string } {
  const error = (result as { error?: unknown }).error;
  if (error instanceof Error) return { code: (error as { code?: string }).code, message: error.message };
  return error as { code?: string; message: string };
}

describe("onceStep in Mastra's workflow runner", () => {
  it("a run whose task was cancelled: the step charges nothing and the run fails, told who cancelled it and why", async () => {
    const orderId = newOrder();
    const runId = `run-${orderId}`;
    const by = { by: "ops@example.com", why: "the order was withdrawn" };
    await store.cancelTask({ taskId: runId }, by);
    const result = await runCharge(await chargeTool(orderId), runId, {
      orderId,
      amount: 1_200,
      currency: "eur",
    });
    expect(result.status).toBe("failed");
    const failure = failureOf(result);
    expect(failure.code).toBe("ONCE_TASK_CANCELLED");
    expect(failure.message).toContain(`task "${runId}" was cancelled by ${by.by}`);
    expect(failure.message).toContain(by.why);
    expect(await charges(orderId)).toBe(0);
  });

  it("started again with the same runId: the step replays its charge; another input for it is refused, nothing charged again", async () => {
    const orderId = newOrder();
    const runId = `run-${orderId}`;
    const charge = await chargeTool(orderId);
    const input = { orderId, amount: 1_200, currency: "eur" };
    const first = await runCharge(charge, runId, input);
    expect(first.status).toBe("success");
    const again = await runCharge(charge, runId, input);
    expect(again).toMatchObject({ status: "success", result: (first as { result: unknown }).result });
    const changed = await runCharge(charge, runId, { ...input, amount: 9_900 });
    expect(changed.status).toBe("failed");
    expect(failureOf(changed)).toMatchObject({
      code: "ONCE_CONFLICT",
      message: expect.stringContaining("already belongs to a different charge_customer call (other input)"),
    });
    expect(await charges(orderId)).toBe(1);
  });

  it("a step named like a model turn's step is refused before anything runs", async () => {
    const orderId = newOrder();
    const charge = await chargeTool(orderId);
    const task = new AgentTask({ taskId: `run-${orderId}`, store, tools: [charge] });
    const input = { orderId, amount: 1_200, currency: "eur" };
    await expect(task.step(charge.name, "turn-0", input)).rejects.toThrow(InvalidKeyPartError);
    await expect(task.step(charge.name, "turn-2/call_1", input)).rejects.toThrow(
      /invalid stepId: "turn-2\/call_1" is the name of a model turn's step/,
    );
    expect(await charges(orderId)).toBe(0);
  });
});
