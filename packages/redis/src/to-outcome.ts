import type { ApprovalRequestOutcome, ClaimOutcome, WriteOutcome } from "@once/core";
import {
  type CodedClaim,
  type CodedWrite,
  decodeApprovalRequest,
  decodeClaim,
  decodeWrite,
  OUTCOME_CODES,
} from "@once/core/internal";
import { RedisScriptError } from "./errors.js";
import type { ScriptName } from "./script-names.js";

// Where each field sits in a script's reply, after the code (see each script's contract block); what the
// codes and fields mean is @once/core's, shared with the PostgreSQL functions.
const OWNERSHIP = ["fence", "token", "leaseUntil", "claims"] as const;
const GRANT = [...OWNERSHIP, "detail", "approved"] as const;
const CLAIM_FIELDS: Record<number, readonly (keyof CodedClaim)[]> = {
  [OUTCOME_CODES.acquired]: GRANT,
  [OUTCOME_CODES.takeover]: GRANT,
  [OUTCOME_CODES.reconcile]: GRANT,
  [OUTCOME_CODES.replay]: ["fence", "result", "trace"],
  [OUTCOME_CODES.replay_error]: ["fence", "result", "trace"],
  [OUTCOME_CODES.in_flight]: ["fence", "detail", "remaining"],
  [OUTCOME_CODES.conflict]: ["detail"],
  [OUTCOME_CODES.awaiting_approval]: ["fence", "detail", "requestedAt", "expiresAt"],
  [OUTCOME_CODES.cancelled]: ["fence", "cancelBy", "cancelWhy", "cancelAt"],
};
const WRITE_FIELDS: Record<number, readonly (keyof CodedWrite)[]> = {
  [OUTCOME_CODES.ok]: ["fence", "leaseUntil", "cancelRequested"],
  [OUTCOME_CODES.lost]: [],
  [OUTCOME_CODES.refused]: ["detail"],
};

type ClaimScript = "claim" | "claim-filed";
type WriteScript = Exclude<
  ScriptName,
  ClaimScript | "get" | "request-approval" | "cancel-task" | "cancel-record"
>;

/** Turns a script's coded reply into its outcome. */
export function toOutcome(script: ClaimScript, reply: unknown): ClaimOutcome;
export function toOutcome(script: WriteScript, reply: unknown): WriteOutcome;
export function toOutcome(script: ClaimScript | WriteScript, reply: unknown): ClaimOutcome | WriteOutcome {
  const malformed = (): never => {
    throw new RedisScriptError(script, `unexpected reply ${JSON.stringify(reply)}`);
  };
  if (!Array.isArray(reply) || typeof reply[0] !== "number") return malformed();
  const code: number = reply[0];
  const coded: CodedClaim & CodedWrite = { code };
  let at = 1;
  const claims = script === "claim" || script === "claim-filed";
  for (const field of (claims ? CLAIM_FIELDS : WRITE_FIELDS)[code] ?? []) coded[field] = reply[at++];
  return claims ? decodeClaim(coded, malformed) : decodeWrite(coded, malformed);
}

/**
 * The file script's reply: undefined when the key is filed (`{10}`), else the claim's answer, `cancelled`
 * (its fence 0: the script does not see the record).
 */
export function toFiling(reply: unknown): Extract<ClaimOutcome, { outcome: "cancelled" }> | undefined {
  if (Array.isArray(reply) && reply.length === 1 && reply[0] === OUTCOME_CODES.ok) return undefined;
  const outcome = toOutcome("claim", reply);
  if (outcome.outcome !== "cancelled")
    throw new RedisScriptError("file", `unexpected reply ${JSON.stringify(reply)}`);
  return outcome;
}

/** The request-approval script's reply, `{10, fence, requested_at, expires_at}` or a refusal, as its outcome. */
export function toApprovalRequest(reply: unknown): ApprovalRequestOutcome {
  const malformed = (): never => {
    throw new RedisScriptError("request-approval", `unexpected reply ${JSON.stringify(reply)}`);
  };
  if (!Array.isArray(reply) || typeof reply[0] !== "number") return malformed();
  const [code, ...rest] = reply as [number, ...unknown[]];
  if (code === OUTCOME_CODES.refused) return decodeApprovalRequest({ code, detail: rest[0] }, malformed);
  return decodeApprovalRequest({ code, fence: rest[0], requestedAt: rest[1], expiresAt: rest[2] }, malformed);
}
