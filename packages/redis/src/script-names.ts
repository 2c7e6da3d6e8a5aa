/**
 * The version in every script's registered name (`once_v3_claim`). Bump it whenever a script or the record
 * layout changes, so two versions of @once/redis sharing one client never run each other's scripts; a test
 * holds every released name to its digest in test/script-digests.json.
 */
export const SCRIPT_VERSION = "v3";

/** Every Lua script, by the name of its file in `lua/` (without `-<numberOfKeys>.lua`). */
export const SCRIPT_NAMES = [
  "claim",
  "begin-effect",
  "complete",
  "fail-terminal",
  "release",
  "mark-unknown",
  "heartbeat",
  "resolve-applied",
  "resolve-not-applied",
  "give-up",
  "resolve",
  "get",
] as const;

export type ScriptName = (typeof SCRIPT_NAMES)[number];

/** The ioredis command a script is registered as: `begin-effect` → `once_v3_begin_effect`. */
export function commandName(script: ScriptName): string {
  return `once_${SCRIPT_VERSION}_${script.replaceAll("-", "_")}`;
}
