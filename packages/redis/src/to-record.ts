import {
  type OnceRecord,
  type Phase,
  RECORD_STATES,
  type RecordState,
  type Resolution,
  type StoredError,
} from "@once/core";
import { RedisScriptError } from "./errors.js";

const RESOLUTIONS: readonly Resolution["as"][] = ["applied", "not_applied", "failed"];

/** Reads the reply of the get script (`{pttl, {field, value, …}}`) as a record, or undefined if none. */
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
  // A result of 65 to 128 bytes is kept in two parts, each cut between UTF-8 characters (see complete).
  if (result !== undefined) record.result = result + (fields.get("result2") ?? "");
  const error = fields.get("error");
  if (error !== undefined) record.error = JSON.parse(error) as StoredError;
  const trace = fields.get("trace");
  if (trace !== undefined) record.trace = trace;
  const as = fields.get("res_as") as Resolution["as"] | undefined;
  if (as !== undefined && RESOLUTIONS.includes(as)) {
    record.resolution = {
      as,
      by: fields.get("res_by") ?? "",
      why: fields.get("res_why") ?? "",
      at: Number(fields.get("res_at") ?? 0),
    };
  }
  // -1 would mean no expiry: every transition sets one, so only a hand-edited record lacks it.
  if (pttl >= 0) record.ttlMs = pttl;
  return record;
}
