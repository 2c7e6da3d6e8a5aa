/**
 * The version of the scripts and of the record layout they write, in every script's name (`once_v3_claim`):
 * the name errors and `scriptDigests` give. Bump it whenever a script or the layout changes, so a name
 * stands for one Lua text and one layout; a test holds every released name to its digest in
 * test/script-digests.json. (Scripts run by digest, so two builds on one client never run each other's.)
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

/** A script's versioned name: `begin-effect` → `once_v3_begin_effect`. */
export function commandName(script: ScriptName): string {
  return `once_${SCRIPT_VERSION}_${script.replaceAll("-", "_")}`;
}
