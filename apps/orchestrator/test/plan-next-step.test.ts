import { orderAgentTools } from "@once/order-agent";
import { describe, expect, it } from "vitest";
import { type JournalStep, planNextStep } from "../src/index.js";

const tools = orderAgentTools();
const order = { orderId: "o-1", status: "pending", amount: 1234, currency: "eur", email: "c@example.com" };

function done(n: number, tool: string, result: unknown): JournalStep {
  return { n, stepId: `step-${n}`, tool, input: {}, state: "done", result };
}

describe("planNextStep", () => {
  it("reads, charges, emails a receipt, then marks the order paid", () => {
    const steps: JournalStep[] = [];
    expect(planNextStep(tools, "o-1", steps)).toEqual({
      tool: "get_order_status",
      input: { orderId: "o-1" },
    });
    steps.push(done(1, "get_order_status", order));
    expect(planNextStep(tools, "o-1", steps)).toEqual({
      tool: "charge_customer",
      input: { orderId: "o-1", amount: 1234, currency: "eur" },
    });
    steps.push(
      done(2, "charge_customer", { chargeId: "ch_1", orderId: "o-1", amount: 1234, currency: "eur" }),
    );
    expect(planNextStep(tools, "o-1", steps)).toEqual({
      tool: "send_email",
      input: {
        orderId: "o-1",
        to: "c@example.com",
        subject: "Receipt for order o-1",
        body: "We charged 12.34 EUR (charge ch_1).",
      },
    });
    steps.push(done(3, "send_email", { emailId: "em_1", orderId: "o-1" }));
    expect(planNextStep(tools, "o-1", steps)).toEqual({
      tool: "set_status",
      input: { orderId: "o-1", status: "paid" },
    });
    steps.push(done(4, "set_status", { orderId: "o-1", status: "paid" }));
    expect(planNextStep(tools, "o-1", steps)).toBeUndefined();
  });

  it("does nothing for an order that is not pending", () => {
    expect(
      planNextStep(tools, "o-1", [done(1, "get_order_status", { ...order, status: "paid" })]),
    ).toBeUndefined();
  });

  it("opens a ticket and cancels the order when the charge failed for good", () => {
    const steps: JournalStep[] = [
      done(1, "get_order_status", order),
      {
        n: 2,
        stepId: "step-2",
        tool: "charge_customer",
        input: {},
        state: "failed",
        error: { name: "PaymentsError" },
      },
    ];
    expect(planNextStep(tools, "o-1", steps)).toEqual({
      tool: "create_ticket",
      input: { orderId: "o-1", subject: "Payment failed for order o-1 (PaymentsError)" },
    });
    steps.push(done(3, "create_ticket", { ticketId: "tk_1", orderId: "o-1" }));
    expect(planNextStep(tools, "o-1", steps)).toEqual({
      tool: "set_status",
      input: { orderId: "o-1", status: "cancelled" },
    });
  });
});
