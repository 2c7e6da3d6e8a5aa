import type { Charge, Email } from "@once/payments";
import { describe, expect, it } from "vitest";
import { APPROVAL_THRESHOLD_CENTS, type ApproverLine, countApprovals } from "../src/index.js";

const T0 = Date.parse("2026-01-01T00:00:00.000Z");
const at = (ms: number) => new Date(T0 + ms).toISOString();
const charge = (orderId: string, amount: number, ms: number): Charge => ({
  id: `ch_${orderId}_${ms}`,
  orderId,
  amount,
  currency: "eur",
  metadata: {},
  createdAt: at(ms),
});
const email = (orderId: string, ms: number): Email =>
  ({
    id: `em_${orderId}_${ms}`,
    orderId,
    to: "c@example.com",
    subject: "s",
    body: "b",
    metadata: {},
    createdAt: at(ms),
  }) as Email;
const OVER = APPROVAL_THRESHOLD_CENTS + 1;
const UNDER = APPROVAL_THRESHOLD_CENTS;
const asked = (id: string, orderId: string, amount: number, ms: number): ApproverLine => ({
  type: "asked",
  id,
  taskId: `t-${orderId}`,
  orderId,
  amount,
  at: T0 + ms,
});
const decided = (
  id: string,
  orderId: string,
  amount: number,
  decision: "approved" | "denied",
  ms: number,
  outcome = "decided",
): ApproverLine => ({
  type: "decided",
  id,
  taskId: `t-${orderId}`,
  orderId,
  amount,
  decision,
  at: T0 + ms,
  outcome,
});

describe("countApprovals: the approvals demo's figures from the ledger and the approver's lines", () => {
  it("a clean run counts nothing wrong", () => {
    const figures = countApprovals(
      { charges: [charge("a", OVER, 200), charge("b", UNDER, 50)], emails: [email("a", 10), email("b", 10)] },
      [asked("1", "a", OVER, 0), decided("1", "a", OVER, "approved", 100)],
    );
    expect(figures).toMatchObject({
      approvalsRequested: 1,
      approvalsAskedTwice: 0,
      approvalsApproved: 1,
      chargesMade: 2,
      chargesUnderThreshold: 1,
      effectsWithoutApproval: 0,
      effectsPerApprovalMax: 1,
      effectsAfterDeny: 0,
      effectsAfterCancel: 0,
      duplicateEffects: 0,
    });
  });

  it("counts a charge over the threshold before, or without, its approval; and one approval charged twice", () => {
    const figures = countApprovals(
      {
        charges: [
          charge("a", OVER, 50),
          charge("a", OVER, 300),
          charge("a", OVER, 400),
          charge("b", OVER + 5, 10),
        ],
        emails: [],
      },
      [asked("1", "a", OVER, 0), decided("1", "a", OVER, "approved", 100)],
    );
    // a's charge at 50 ms came before the approval; b's amount was never approved.
    expect(figures.effectsWithoutApproval).toBe(2);
    expect(figures.effectsPerApprovalMax).toBe(2);
    expect(figures.duplicateEffects).toBe(2);
  });

  it("counts a second request for an order, a charge after its denial, effects after the cancel returned", () => {
    const cancel: ApproverLine = {
      type: "cancelled",
      id: "3",
      taskId: "t-c",
      orderId: "c",
      amount: OVER,
      at: T0 + 100,
      returnedAt: T0 + 110,
      outcome: "cancelled",
    };
    const figures = countApprovals(
      {
        charges: [charge("a", UNDER, 500), charge("c", UNDER, 105)],
        emails: [email("c", 20), email("c", 600)],
      },
      [
        asked("1", "a", OVER, 0),
        decided("1", "a", OVER, "denied", 100),
        asked("2", "a", OVER + 1, 200),
        // Refused by the store: decided nothing.
        decided("2", "a", OVER + 1, "approved", 300, "refused: the record moved on"),
        asked("3", "c", OVER, 0),
        cancel,
      ],
    );
    expect(figures).toMatchObject({
      approvalsRequested: 3,
      approvalsAskedTwice: 1,
      approvalsApproved: 0,
      approvalsDenied: 1,
      effectsAfterDeny: 1,
      // The email at 600 ms; the charge at 105 ms began before the cancel returned.
      effectsAfterCancel: 1,
      cancelledTask: "t-c",
      duplicateEffects: 1,
    });
  });
});
