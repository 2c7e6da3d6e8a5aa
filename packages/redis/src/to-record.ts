import {
  type ApprovalRequest,
  type Cancellation,
  type OnceRecord,
  type Phase,
  RECORD_STATES,
  type RecordState,
  type Resolution,
  type StoredError,
} from "@once/core";
import { RedisScriptError } from "./errors.js";

const RESOLUTIONS: readonly Resolution["as"][] = ["applied", "not_applied", "failed"];

/**
 * Reads the reply of the get script (`{pttl, {field, value, …}}`, in text: record-bytes.ts) as a record, or
 * undefined if none. The script has refused a record of a newer layout, and read one of an earlier layout in
 * the fields of this one.
 */
export function toRecord(key: string, reply: unknown): OnceRecord | undefined {
  if (!Array.isArray(reply) || typeof reply[0] !== "number" || !Array.isArray(reply[1])) {
    throw new RedisScriptError("get", `unexpected reply ${JSON.stringify(reply)}`);
  }
  const [pttl, flat] = reply as [number, unknown[]];
  if (flat.length === 0) return undefined;
  const fields = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) fields.set(String(flat[i]), String(flat[i + 1]));

  const state = fields.get("state") as RecordState;
  if (!RECORD_STATES.includes(state))
    throw new RedisScriptError("get", `record ${key} has state ${JSON.stringify(state)}`);
  const record: OnceRecord = {
    key,
    state,
    phase: fields.get("phase") === "prepare" ? "prepare" : ("effect" satisfies Phase),
    fence: Number(fields.get("fence") ?? 0),
    fingerprint: fields.get("fp") ?? "",
    tool: fields.get("tool") ?? "",
    claims: Number(fields.get("claims") ?? 0),
    createdAt: Number(fields.get("created_at") ?? 0),
    updatedAt: Number(fields.get("updated_at") ?? 0),
  };
  const owner = fields.get("owner");
  if (owner !== undefined) record.owner = owner;
  const leaseUntil = fields.get("lease_until");
  if (leaseUntil !== undefined) record.leaseUntil = Number(leaseUntil);
  const result = fields.get("result");
  if (result !== undefined) record.result = result;
  const error = fields.get("error");
  if (error !== undefined) record.error = JSON.parse(error) as StoredError;
  const trace = fields.get("trace");
  if (trace !== undefined) record.trace = trace;
  // The owner's process's liveness entry: it says something only while the record has an owner (a record of
  // layout 5 or earlier may keep it after a settle).
  const live = fields.get("live");
  if (live !== undefined && (state === "claimed" || state === "reconciling")) record.liveness = live;
  const as = fields.get("res_as") as Resolution["as"] | undefined;
  if (as !== undefined && RESOLUTIONS.includes(as)) {
    record.resolution = {
      as,
      by: fields.get("res_by") ?? "",
      why: fields.get("res_why") ?? "",
      at: Number(fields.get("res_at") ?? 0),
    };
  }
  const approval = approvalOf(fields);
  if (approval !== undefined) record.approval = approval;
  // The call's task, when the store keeps identities, and its task's cancellation.
  const namespace = fields.get("ns");
  const taskId = fields.get("task_id");
  const stepId = fields.get("step_id");
  if (namespace !== undefined && taskId !== undefined && stepId !== undefined)
    record.task = { namespace, taskId, stepId };
  const cancellation = cancellationOf(fields);
  if (cancellation !== undefined) record.cancellation = cancellation;
  // -1 would mean no expiry: every transition sets one, so only a hand-edited record lacks it.
  if (pttl >= 0) record.ttlMs = pttl;
  return record;
}

/** A task's cancellation as a record or a task entry keeps it (`cancel_*`), or undefined when there is none. */
export function cancellationOf(fields: Map<string, string>): Cancellation | undefined {
  const by = fields.get("cancel_by");
  if (by === undefined) return undefined;
  return { by, why: fields.get("cancel_why") ?? "", at: Number(fields.get("cancel_at") ?? 0) };
}

/** The approval request a record's `apr_*` fields hold (layout 4), or undefined when it was never asked about. */
function approvalOf(fields: Map<string, string>): ApprovalRequest | undefined {
  const requestedAt = fields.get("apr_at");
  if (requestedAt === undefined) return undefined;
  const approval: ApprovalRequest = {
    reason: fields.get("apr_reason") ?? "",
    requestedAt: Number(requestedAt),
    expiresAt: Number(fields.get("apr_until") ?? 0),
  };
  const as = fields.get("apr_as");
  const at = Number(fields.get("apr_decided") ?? 0);
  if (as === "approved" || as === "denied")
    approval.decision = { as, by: fields.get("apr_by") ?? "", why: fields.get("apr_why") ?? "", at };
  else if (as === "expired") approval.decision = { as, at };
  return approval;
}
