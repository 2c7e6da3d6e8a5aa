// The Mastra agent and workflow the tests run, as a user writes them, on once's model, tools and steps.

import { Agent } from "@mastra/core/agent";
import type { Tool } from "@mastra/core/tools";
import { createStep, createWorkflow } from "@mastra/core/workflows";
import type { AnyTool, OnceStore } from "@once/core";
import { z } from "zod";
import { onceStep, type SpecLanguageModel } from "../src/index.js";

export const INSTRUCTIONS = "You settle orders: read the order, charge it, email the receipt, mark it paid.";
export const PROMPT = "Settle the order.";

/** The agent as a user writes it, on the run's model and tools. */
export function orderAgent(
  model: SpecLanguageModel,
  tools: Record<string, Tool>,
  instructions = INSTRUCTIONS,
) {
  return new Agent({ id: "order-agent", name: "order agent", instructions, model: model as never, tools });
}

/** Each step's tool calls, by tool name and input: the shape of a run. */
export function stepsOf(result: {
  steps: { toolCalls: { payload: { toolName: string; args?: unknown } }[] }[];
}) {
  return result.steps.map((step) =>
    step.toolCalls.map((call) => ({ tool: call.payload.toolName, input: call.payload.args })),
  );
}

const order = z.object({ orderId: z.string(), amount: z.number().int().positive(), currency: z.string() });

/**
 * Settling an order as a workflow: a person approves the charge (the run suspends until resumed), then the
 * charge and the receipt run as once steps, keyed from the run and the step.
 */
export function settleWorkflow(
  tools: { chargeCustomer: AnyTool; sendEmail: AnyTool },
  store: OnceStore,
  leaseMs: number,
  /** Called as the run passes from the charge step to the email step: this process ran the charge step. */
  charged: () => void = () => {},
) {
  const approve = createStep({
    id: "approve",
    inputSchema: order,
    outputSchema: order,
    resumeSchema: z.object({ approved: z.boolean() }),
    execute: async ({ inputData, resumeData, suspend }) => {
      if (!resumeData?.approved)
        return suspend({ reason: `charge ${inputData.amount} for ${inputData.orderId}?` });
      return inputData;
    },
  });
  const charge = onceStep(tools.chargeCustomer, { store, leaseMs });
  const email = onceStep(tools.sendEmail, { store, leaseMs });
  return createWorkflow({
    id: "settle-order",
    inputSchema: order,
    outputSchema: z.object({ emailId: z.string(), orderId: z.string() }),
  })
    .then(approve)
    .then(charge)
    .map(async ({ inputData }) => {
      charged();
      const { orderId, amount } = inputData as { orderId: string; amount: number };
      return {
        orderId,
        to: "customer@example.com",
        subject: `Receipt for ${orderId}`,
        body: `We charged ${(amount / 100).toFixed(2)} EUR for your order.`,
      };
    })
    .then(email)
    .commit();
}
