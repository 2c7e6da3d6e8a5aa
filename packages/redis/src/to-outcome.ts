import type { ClaimOutcome, StoredError, WriteOutcome } from "@once/core";
import { retryAfterFor } from "@once/core/internal";
import { RedisScriptError } from "./errors.js";
import type { ScriptName } from "./script-names.js";

// The codes the Lua scripts reply with (see each script's contract block).
const ACQUIRED = 1;
const TAKEOVER = 2;
const RECONCILE = 3;
const REPLAY = 4;
const REPLAY_ERROR = 5;
const IN_FLIGHT = 6;
const CONFLICT = 7;
const OK = 10;
const LOST = 11;
const REFUSED = 12;

type WriteScript = Exclude<ScriptName, "claim" | "get">;

/** Turns a script's coded reply into its outcome; the only place that knows the codes. */
export function toOutcome(script: "claim", reply: unknown): ClaimOutcome;
export function toOutcome(script: WriteScript, reply: unknown): WriteOutcome;
export function toOutcome(script: "claim" | WriteScript, reply: unknown): ClaimOutcome | WriteOutcome {
  if (!Array.isArray(reply) || typeof reply[0] !== "number") return malformed(script, reply);
  const [code, a, b, c, d, e] = reply as [number, unknown, unknown, unknown, unknown, unknown];
  if (script === "claim") {
    switch (code) {
      case ACQUIRED:
        return { outcome: "acquired", ...ownership(script, a, b, c, d) };
      case TAKEOVER:
        return { outcome: "takeover", ...ownership(script, a, b, c, d) };
      case RECONCILE:
        if (e !== "claimed" && e !== "reconciling" && e !== "unknown") return malformed(script, reply);
        return { outcome: "reconcile", from: e, ...ownership(script, a, b, c, d) };
      case REPLAY:
        return {
          outcome: "replay",
          result: typeof b === "string" ? b : "null",
          fence: int(script, a),
          ...traced(c),
        };
      case REPLAY_ERROR:
        return { outcome: "replay_error", error: storedError(b), fence: int(script, a), ...traced(c) };
      case IN_FLIGHT:
        if (b !== "claimed" && b !== "reconciling") return malformed(script, reply);
        return {
          outcome: "in_flight",
          retryAfterMs: retryAfterFor(int(script, c)),
          state: b,
          fence: int(script, a),
        };
      case CONFLICT:
        return { outcome: "conflict", tool: typeof a === "string" ? a : "" };
    }
    return malformed(script, reply);
  }
  switch (code) {
    case OK:
      return b === null || b === undefined
        ? { outcome: "ok", fence: int(script, a) }
        : { outcome: "ok", fence: int(script, a), leaseUntil: int(script, b) };
    case LOST:
      return { outcome: "lost" };
    case REFUSED:
      return { outcome: "refused", reason: String(a) };
  }
  return malformed(script, reply);
}

function ownership(script: ScriptName, fence: unknown, token: unknown, leaseUntil: unknown, claims: unknown) {
  if (typeof token !== "string") return malformed(script, token);
  return {
    token,
    fence: int(script, fence),
    leaseUntil: int(script, leaseUntil),
    claims: int(script, claims),
  };
}

function traced(trace: unknown): { trace?: string } {
  return typeof trace === "string" ? { trace } : {};
}

function storedError(json: unknown): StoredError {
  // Mirrors MemoryStore: a failed record always replays some error, even a bare one.
  if (typeof json !== "string") return { name: "Error", message: "failed" };
  return JSON.parse(json) as StoredError;
}

function int(script: ScriptName, value: unknown): number {
  const n = typeof value === "string" ? Number(value) : value;
  if (typeof n !== "number" || !Number.isSafeInteger(n)) return malformed(script, value);
  return n;
}

function malformed(script: ScriptName, reply: unknown): never {
  throw new RedisScriptError(script, `unexpected reply ${JSON.stringify(reply)}`);
}
