// What the authority run does to each task, drawn from its seed: a task charges an order and then emails a
// receipt; a charge over the limit needs a person's approval, which the approvers give, refuse, fight over
// (an approve and a deny sent at the same moment) or leave to expire; some tasks are cancelled mid-run.

import { Random } from "../random.js";

/** Charges above this many cents need approval (the tool's policy). */
export const APPROVAL_LIMIT = 100;

/**
 * What the approvers do with a task's approval request: `approve`, `deny`, `race` (one approver approves and
 * another denies at the same moment: the store takes exactly one), or `ignore` (nobody answers: it expires).
 */
export type ApprovalPlan = "approve" | "deny" | "race" | "ignore";

export interface AuthorityTask {
  taskId: string;
  orderId: string;
  /** Cents; over {@link APPROVAL_LIMIT} the charge waits for a decision. */
  amount: number;
  /** What the approvers do, for a charge that needs approval. */
  approval?: ApprovalPlan;
  /** Cancelled this long after the run started (ms). */
  cancelAfterMs?: number;
}

/** The tasks of one run: about half need approval, one in five is cancelled at a random moment. */
export function authorityPlan(seed: number, tasks: number, durationMs: number): AuthorityTask[] {
  const random = new Random(seed).fork("authority");
  const plans: readonly ApprovalPlan[] = ["approve", "approve", "deny", "race", "ignore"];
  return Array.from({ length: tasks }, (_, i) => {
    const needsApproval = random.chance(0.5);
    const amount = needsApproval ? random.int(APPROVAL_LIMIT + 1, 10_000) : random.int(1, APPROVAL_LIMIT);
    const cancelled = random.chance(0.2);
    return {
      taskId: `authority-${seed}-${i}`,
      orderId: `order-${seed}-${i}`,
      amount,
      ...(needsApproval ? { approval: random.pick(plans) } : {}),
      ...(cancelled ? { cancelAfterMs: random.int(0, Math.floor(durationMs * 0.6)) } : {}),
    };
  });
}
