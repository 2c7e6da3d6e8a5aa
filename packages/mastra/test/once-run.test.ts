import { createTool } from "@mastra/core/tools";
import { createWorkflow } from "@mastra/core/workflows";
import {
  type AnyTool,
  defineTool,
  IdempotencyConflictError,
  InvalidKeyPartError,
  InvalidToolError,
} from "@once/core";
import { hookedOrderAgentTools, MemoryOrderBook, pendingOrder } from "@once/order-agent";
import { PaymentsClient } from "@once/payments";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { onceRun, onceStep, RecordedTurnMismatchError, UnsettledToolCallError } from "../src/index.js";
import { payments, store, useAgentWorld } from "./agent-world.js";
import { INSTRUCTIONS, orderAgent, PROMPT, stepsOf } from "./order-agent.js";
import { orderAgentModel } from "./order-agent-model.js";

useAgentWorld("mastra");

let serial = 0;
const newOrder = () => `order-${process.pid}-${++serial}`;

async function ledger(orderId: string) {
  const client = new PaymentsClient(payments.url);
  return {
    charges: (await client.findCharges({ orderId })).length,
    emails: (await client.findEmails({ orderId })).length,
  };
}

async function orderTools(orderId: string) {
  const orders = new MemoryOrderBook();
  await orders.create(pendingOrder(orderId));
  return hookedOrderAgentTools(payments.url, orders).all;
}

/** One run of the agent as a user writes it, in a fresh "process": a new once run and model. */
async function runAgent(orderId: string, tools: AnyTool[], instructions = INSTRUCTIONS) {
  const { model, answers } = orderAgentModel(orderId);
  const run = onceRun({ runId: `run-${orderId}`, store, tools });
  const result = await orderAgent(run.model(model), run.tools, instructions).generate(PROMPT, {
    runId: run.runId,
    maxSteps: 10,
  });
  return { text: result.text, steps: stepsOf(result as never), modelCalls: answers() };
}

describe("onceRun with Mastra's Agent", () => {
  it("charges once and emails once; run again with the same runId, it asks nothing and charges nothing", async () => {
    const orderId = newOrder();
    const tools = await orderTools(orderId);
    const first = await runAgent(orderId, tools);
    expect(first).toMatchObject({ text: `order ${orderId} is paid`, modelCalls: 4 });
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
    // The same calls and amounts: the recorded turns, not new answers.
    expect(await runAgent(orderId, tools)).toEqual({ ...first, modelCalls: 0 });
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("a stored failure (a declined card) reaches the model, in the same words when the run is resumed", async () => {
    const orderId = newOrder();
    const tools = (await orderTools(orderId)).map((t) =>
      t.name === "charge_customer"
        ? defineTool({
            ...t,
            reconcile: undefined,
            run: () => {
              throw new Error("card declined");
            },
            classifyError: () => "terminal",
          } as never)
        : t,
    );
    const first = await runAgent(orderId, tools);
    expect(first.modelCalls).toBe(4);
    expect(await runAgent(orderId, tools)).toEqual({ ...first, modelCalls: 0 });
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 1 });
  });
});

describe("an effect call whose outcome nobody knows", () => {
  it("ends the run before its next turn: the model is not asked again, so it cannot call the tool under a new id", async () => {
    const orderId = newOrder();
    const tools = (await orderTools(orderId)).map((t) =>
      t.name === "charge_customer"
        ? defineTool({
            ...t,
            reconcile: undefined,
            run: () => {
              throw new Error("connection reset after the request was sent");
            },
            classifyError: () => "unknown",
          } as never)
        : t,
    );
    const { model, answers } = orderAgentModel(orderId);
    const run = onceRun({ runId: `run-${orderId}`, store, tools });
    const failed = orderAgent(run.model(model), run.tools).generate(PROMPT, {
      runId: run.runId,
      maxSteps: 10,
    });
    await expect(failed).rejects.toThrow(UnsettledToolCallError);
    await expect(failed).rejects.toThrow(/turn 2 of task .* was not asked: charge_customer/);
    expect(answers()).toBe(2);
  });
});

describe("a resumed run that asks another thing, or was given bad input: a named error, nothing dispatched", () => {
  it("changed instructions for a recorded turn: IdempotencyConflictError naming the turn", async () => {
    const orderId = newOrder();
    const tools = await orderTools(orderId);
    await runAgent(orderId, tools);
    const resumed = runAgent(orderId, tools, "You settle orders, and you are brief about it.");
    await expect(resumed).rejects.toThrow(IdempotencyConflictError);
    await expect(resumed).rejects.toThrow(/^turn 0 of task "run-order-[^"]+" \(its model or prompt differs/);
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("resumed without a tool a recorded turn called: RecordedTurnMismatchError naming turn and tool", async () => {
    const orderId = newOrder();
    const tools = await orderTools(orderId);
    await runAgent(orderId, tools);
    const resumed = runAgent(
      orderId,
      tools.filter((t) => t.name !== "send_email"),
    );
    await expect(resumed).rejects.toThrow(RecordedTurnMismatchError);
    await expect(resumed).rejects.toThrow(
      /turn 1 of task .* called send_email, which is not among the tools given/,
    );
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 1 });
  });

  it("an agent whose model is not the run's: its tool calls were never recorded, nothing runs", async () => {
    const orderId = newOrder();
    const { model, answers } = orderAgentModel(orderId);
    const run = onceRun({ runId: `run-${orderId}`, store, tools: await orderTools(orderId) });
    const result = await orderAgent(model, run.tools).generate(PROMPT, { runId: run.runId, maxSteps: 2 });
    // Mastra tells the model of a failed tool call; once ran nothing for it.
    expect(JSON.stringify(result.steps)).toMatch(/UnrecordedToolCallError|no recorded turn of this task/);
    expect(answers()).toBe(2);
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 0 });
  });

  it("a Mastra tool handed in instead of a once tool: InvalidToolError, for a run and for a workflow step", () => {
    const plain = createTool({
      id: "plain",
      description: "",
      inputSchema: z.object({}),
      execute: async () => "ok",
    });
    expect(() => onceRun({ runId: "r", store, tools: [plain as never] })).toThrow(
      /invalid tool "\(unnamed\)": is not a once tool: declare it with defineTool and a kind/,
    );
    expect(() => onceStep(plain as never, { store })).toThrow(InvalidToolError);
  });

  it("no run id: InvalidKeyPartError naming it, before anything runs", async () => {
    const orderId = newOrder();
    const tools = await orderTools(orderId);
    expect(() => onceRun({ runId: undefined as never, store, tools })).toThrow(InvalidKeyPartError);
    expect(() => onceRun({ runId: "", store, tools })).toThrow(/invalid taskId: must not be empty/);
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 0 });
  });
});

/** A workflow of one once step, the charge, started as a run with the given id and input. */
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

const chargeOf = (tools: AnyTool[]) => tools.find((t) => t.name === "charge_customer") as AnyTool;

describe("onceStep in Mastra's workflow runner: the step <stepId> of the task <runId>", () => {
  it("a run whose task was cancelled: the step charges nothing and the run fails, told who cancelled it and why", async () => {
    const orderId = newOrder();
    const runId = `run-${orderId}`;
    const by = { by: "ops@example.com", why: "the order was withdrawn" };
    await store.cancelTask({ taskId: runId }, by);
    const input = { orderId, amount: 1_200, currency: "eur" };
    const result = await runCharge(chargeOf(await orderTools(orderId)), runId, input);
    expect(result.status).toBe("failed");
    const failure = failureOf(result);
    expect(failure.code).toBe("ONCE_TASK_CANCELLED");
    expect(failure.message).toContain(`task "${runId}" was cancelled by ${by.by}`);
    expect(failure.message).toContain(by.why);
    expect(await ledger(orderId)).toEqual({ charges: 0, emails: 0 });
  });

  it("started again with the same runId: the step replays its charge; another input for it is refused, nothing charged again", async () => {
    const orderId = newOrder();
    const runId = `run-${orderId}`;
    const charge = chargeOf(await orderTools(orderId));
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
    expect(await ledger(orderId)).toEqual({ charges: 1, emails: 0 });
  });
});
