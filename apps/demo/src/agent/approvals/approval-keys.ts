import type { KeyLayout } from "@once/order-agent";

/**
 * Where naive's orchestrator and the approver meet in Redis: the requests the orchestrator sends a person
 * (a list), the person's answers (a hash by the AI SDK's approvalId, read by the process that asked), and the
 * channel a cancel is published on (heard by whichever orchestrator is running then, if any).
 */
export function naiveApprovalKeys(layout: KeyLayout) {
  return {
    requests: `${layout.root}approvals:requests`,
    answers: `${layout.root}approvals:answers`,
    cancels: `${layout.root}approvals:cancels`,
  };
}

/** A request naive's orchestrator sends the approver: the AI SDK's tool-approval-request, with the reason. */
export interface NaiveApprovalRequest {
  approvalId: string;
  taskId: string;
  tool: string;
  reason: string;
}

/** The task number of an order of the demo (`orderFor(taskPrefix, n)` names it `<taskPrefix>-order-<n>`). */
export function taskNumberOf(orderId: string): number {
  return Number(/-order-(\d+)$/.exec(orderId)?.[1] ?? Number.NaN);
}
