/**
 * The version of the scripts, in every script's name (`once_v6_claim`): the name errors and `scriptDigests`
 * give. Bump it whenever a script changes, so a name stands for one Lua text; a test holds every released
 * name to its digest in test/script-digests.json. (Scripts run by digest, so two builds on one client never
 * run each other's.) What the scripts store has a number of its own, RECORD_LAYOUT (record-layout.ts),
 * changed only when a record is written in a form an earlier reader would misread.
 */
export const SCRIPT_VERSION = "v8";

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
  "request-approval",
  "decide",
  "get",
  "claim-filed",
  "file",
  "cancel-task",
  "cancel-record",
  "liveness",
  "read-task",
] as const;

export type ScriptName = (typeof SCRIPT_NAMES)[number];

/** A script's versioned name: `begin-effect` → `once_v6_begin_effect`. */
export function commandName(script: ScriptName): string {
  return `once_${SCRIPT_VERSION}_${script.replaceAll("-", "_")}`;
}
