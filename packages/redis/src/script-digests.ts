import { readScriptFiles } from "./load-scripts.js";
import type { ScriptName } from "./script-names.js";

/** One of once's Lua scripts as Redis' script cache knows it. */
export interface ScriptDigest {
  /** The script's file name without `-<numberOfKeys>.lua`, e.g. `claim`. */
  name: ScriptName;
  /** Its versioned name, e.g. `once_v4_claim`. */
  command: string;
  /** SHA1 of the Lua source: what EVALSHA runs and SCRIPT EXISTS looks up. */
  sha1: string;
}

/** The SHA1 of every script this build of @once/redis runs, for checking a server's script cache. */
export async function scriptDigests(): Promise<ScriptDigest[]> {
  const files = await readScriptFiles();
  return files.map(({ name, command, sha1 }) => ({ name, command, sha1 }));
}
