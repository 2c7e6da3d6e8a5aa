import { createHash } from "node:crypto";
import { readScriptFiles } from "./load-scripts.js";
import type { ScriptName } from "./script-names.js";

/** One of once's Lua scripts as Redis' script cache knows it. */
export interface ScriptDigest {
  /** The script's file name without `-<numberOfKeys>.lua`, e.g. `claim`. */
  name: ScriptName;
  /** The versioned name it is registered under, e.g. `once_v1_claim`. */
  command: string;
  /** SHA1 of the Lua source: what EVALSHA runs and SCRIPT EXISTS looks up. */
  sha1: string;
}

/** The SHA1 of every script this build of @once/redis runs, for checking a server's script cache. */
export async function scriptDigests(): Promise<ScriptDigest[]> {
  const files = await readScriptFiles();
  return files.map(({ name, command, lua }) => ({
    name,
    command,
    sha1: createHash("sha1").update(lua).digest("hex"),
  }));
}
