import type { Charge, Email } from "@once/payments";
import { APPROVAL_THRESHOLD_CENTS } from "./charge-approval.js";

/**
 * The figures of one mode of the approvals demo (`pnpm demo -- --agent --approvals`), every one measured at
 * the payments provider's ledger or by the approver process (what it was asked, what it decided), none from
 * once's own counters.
 */
export interface ApprovalFigures {
  mode: "naive" | "once";
  tasks: number;
  tasksOk: number;
  tasksFailed: number;
  /** Tasks that ended cancelled (the loop stopped on the operator's cancel). */
  tasksCancelled: number;
  /** Times the demo SIGKILLed the orchestrator (it was restarted with the unfinished tasks). */
  orchestratorKills: number;
  /** Requests the approver was asked (each request once, however often it was seen). */
  approvalsRequested: number;
  /** Requests beyond the first for the same order: the same charge asked about again. */
  approvalsAskedTwice: number;
  approvalsApproved: number;
  approvalsDenied: number;
  /** The task the approver cancelled, and whether the cancel reached anything. */
  cancelledTask: string | null;
  cancelOutcome: string | null;
  /** By the ledger. */
  chargesMade: number;
  /** Charges at or under the threshold: no approval needed (ledger). */
  chargesUnderThreshold: number;
  emailsSent: number;
  /** Charges over the threshold with no approval by the approver, for that order and amount, before it. */
  effectsWithoutApproval: number;
  /** The most charges the ledger holds for one approval (its order and amount, made after it); 0 with none. */
  effectsPerApprovalMax: number;
  /** Charges of an order made after the approver denied a request for it. */
  effectsAfterDeny: number;
  /** Charges and emails of the cancelled task's order made after the cancel returned. */
  effectsAfterCancel: number;
  /** Charges and emails beyond one per order (ledger). */
  duplicateEffects: number;
  /** From the first orchestrator's start to the last task's finish. */
  wallMs: number;
}

/** What the approver printed: a request as it first saw it, a decision on it, or its cancel of a task. */
export type ApproverLine =
  | { type: "ready" }
  | { type: "asked"; id: string; taskId: string; orderId: string; amount: number; at: number }
  | {
      type: "decided";
      id: string;
      taskId: string;
      orderId: string;
      amount: number;
      decision: "approved" | "denied";
      at: number;
      outcome: string;
    }
  | {
      type: "cancelled";
      id: string;
      taskId: string;
      orderId: string;
      amount: number;
      at: number;
      returnedAt: number;
      outcome: string;
    }
  | { type: "error"; id: string; error: string };

type Ledger = { charges: readonly Charge[]; emails: readonly Email[] };

const time = (record: { createdAt: string }) => Date.parse(record.createdAt);

/** The approval figures of a run, from the provider's records and the approver's lines. */
export function countApprovals(ledger: Ledger, approver: readonly ApproverLine[]) {
  const asked = approver.flatMap((line) => (line.type === "asked" ? [line] : []));
  // A decision the store refused (the record had moved on) decided nothing.
  const decided = approver.flatMap((line) =>
    line.type === "decided" && line.outcome === "decided" ? [line] : [],
  );
  const approvals = decided.filter((line) => line.decision === "approved");
  const denials = decided.filter((line) => line.decision === "denied");
  const cancel = approver.find((line) => line.type === "cancelled");

  const askedPerOrder = new Map<string, number>();
  for (const { orderId } of asked) askedPerOrder.set(orderId, (askedPerOrder.get(orderId) ?? 0) + 1);

  const approvedBefore = (charge: Charge) =>
    approvals.some((a) => a.orderId === charge.orderId && a.amount === charge.amount && a.at <= time(charge));
  const perApproval = approvals.map(
    (a) =>
      ledger.charges.filter((c) => c.orderId === a.orderId && c.amount === a.amount && time(c) >= a.at)
        .length,
  );
  const duplicates = (records: readonly { orderId: string }[]) => {
    const perOrder = new Map<string, number>();
    for (const { orderId } of records) perOrder.set(orderId, (perOrder.get(orderId) ?? 0) + 1);
    return [...perOrder.values()].reduce((sum, count) => sum + count - 1, 0);
  };
  return {
    approvalsRequested: asked.length,
    approvalsAskedTwice: [...askedPerOrder.values()].reduce((sum, count) => sum + count - 1, 0),
    approvalsApproved: approvals.length,
    approvalsDenied: denials.length,
    cancelledTask: cancel?.taskId ?? null,
    cancelOutcome: cancel?.outcome ?? null,
    chargesMade: ledger.charges.length,
    chargesUnderThreshold: ledger.charges.filter((c) => c.amount <= APPROVAL_THRESHOLD_CENTS).length,
    emailsSent: ledger.emails.length,
    effectsWithoutApproval: ledger.charges.filter(
      (c) => c.amount > APPROVAL_THRESHOLD_CENTS && !approvedBefore(c),
    ).length,
    effectsPerApprovalMax: Math.max(0, ...perApproval),
    effectsAfterDeny: ledger.charges.filter((c) =>
      denials.some((d) => d.orderId === c.orderId && time(c) > d.at),
    ).length,
    effectsAfterCancel: cancel
      ? [...ledger.charges, ...ledger.emails].filter(
          (r) => r.orderId === cancel.orderId && time(r) > cancel.returnedAt,
        ).length
      : 0,
    duplicateEffects: duplicates(ledger.charges) + duplicates(ledger.emails),
  };
}
