import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import type { Cluster, Redis } from "ioredis";
import { RedisScriptError } from "./errors.js";
import { commandName, SCRIPT_NAMES, type ScriptName } from "./script-names.js";

/** Runs one of once's scripts on one key; resolves with the script's raw reply. */
export type RunScript = (
  script: ScriptName,
  key: string,
  args: readonly (string | number)[],
) => Promise<unknown>;

export interface ScriptFile {
  name: ScriptName;
  command: string;
  numberOfKeys: number;
  lua: string;
  /** SHA1 of `lua`: what EVALSHA runs and SCRIPT EXISTS looks up. */
  sha1: string;
}

/** How many copies a write must have before it counts: `WAIT`, or `WAITAOF` when `fsync` is asked for. */
export interface Confirmation {
  replicas: number;
  timeoutMs: number;
  /** Fsynced to the AOF locally and on `replicas` replicas (`WAITAOF 1 replicas timeout`), not only received. */
  fsync: boolean;
}

/** What a confirmed run returns: the script's reply, and how many replicas acknowledged it in time. */
export interface Confirmed {
  reply: unknown;
  acknowledged: number;
}

/**
 * Runs one of once's scripts and, in the same round trip, waits for replicas to acknowledge it (or, with
 * `script` undefined, only waits: for writes this connection sent before). The pipeline goes to the node of
 * `key` (on a Cluster too: WAIT names no key, so it rides along with the command that does).
 */
export type RunConfirmed = (
  script: ScriptName | undefined,
  key: string,
  args: readonly (string | number)[],
  confirmation: Confirmation,
) => Promise<Confirmed>;

/** The two ways a store runs its scripts on one client. */
export interface Scripts {
  run: RunScript;
  runConfirmed: RunConfirmed;
}

type Pipeline = Record<string, (...args: (string | number)[]) => Pipeline> & {
  exec(): Promise<[Error | null, unknown][] | null>;
};

type Eval = (script: string, numberOfKeys: number, ...args: (string | number)[]) => Promise<unknown>;

let files: Promise<ScriptFile[]> | undefined;

/**
 * Reads every script once per process and returns the functions that run them on `client`: `EVALSHA` by
 * each script's SHA1, and `EVAL` of its text when the server's script cache lacks it (NOSCRIPT: a restart, a
 * failover, a `SCRIPT FLUSH`), which caches it again. Addressed by digest, two builds of @once/redis sharing
 * one client each run their own Lua, whatever their versions; ioredis' `defineCommand` would do the same
 * fallback but add a closure, a WeakSet lookup and a copy of the arguments to every call.
 */
export async function loadScripts(client: Redis | Cluster): Promise<Scripts> {
  files ??= readScriptFiles();
  const scripts = await files.catch((error: unknown) => {
    files = undefined;
    throw error;
  });
  const byName = new Map(scripts.map((file) => [file.name, file]));
  const fileOf = (script: ScriptName): ScriptFile => {
    const file = byName.get(script);
    if (file === undefined) throw new RedisScriptError(commandName(script), "no such script in this build");
    return file;
  };
  const evalsha = client.evalsha.bind(client) as Eval;
  const evalText = client.eval.bind(client) as Eval;

  const run: RunScript = (script, key, args) => {
    const { sha1, lua, numberOfKeys } = fileOf(script);
    return evalsha(sha1, numberOfKeys, key, ...args).catch((error: unknown) => {
      if (!isNoScript(error)) throw error;
      return evalText(lua, numberOfKeys, key, ...args);
    });
  };

  const runConfirmed: RunConfirmed = async (script, key, args, confirmation) => {
    const file = script === undefined ? undefined : fileOf(script);
    let replies = await confirmedPipeline(client, file, "evalsha", key, args, confirmation);
    if (file !== undefined && isNoScript(replies[0]?.[0]))
      replies = await confirmedPipeline(client, file, "eval", key, args, confirmation);
    const [ran, waited] = replies;
    if (ran?.[0]) throw ran[0];
    if (waited?.[0]) throw waited[0];
    // WAITAOF answers [local fsyncs, replica fsyncs]: a write not fsynced here counts as not confirmed.
    const answer = waited?.[1];
    const [local, onReplicas] = Array.isArray(answer) ? answer.map(Number) : [1, Number(answer)];
    const acknowledged = (local ?? 0) >= 1 ? (onReplicas ?? 0) : 0;
    return { reply: ran?.[1], acknowledged };
  };

  return { run, runConfirmed };
}

/** The script (or, without one, EXISTS on its key) and its WAIT / WAITAOF, in one pipeline. */
async function confirmedPipeline(
  client: Redis | Cluster,
  file: ScriptFile | undefined,
  how: "evalsha" | "eval",
  key: string,
  args: readonly (string | number)[],
  { replicas, timeoutMs, fsync }: Confirmation,
): Promise<[Error | null, unknown][]> {
  const pipeline = (client as unknown as { pipeline(): Pipeline }).pipeline();
  // Without a script, EXISTS gives the pipeline its key, so a Cluster routes the WAIT to that key's master.
  if (file === undefined) pipeline.exists?.(key);
  else pipeline[how]?.(how === "evalsha" ? file.sha1 : file.lua, file.numberOfKeys, key, ...args);
  if (fsync) pipeline.call?.("WAITAOF", 1, replicas, timeoutMs);
  else pipeline.wait?.(replicas, timeoutMs);
  return (await pipeline.exec()) ?? [];
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOSCRIPT");
}

/**
 * Every script, as Redis will run it.
 *
 * Each file is read whole, with no includes: the lines most scripts share (the server's TIME in ms, the
 * full-token check of an owner write) are written out in each. Resolving includes here would make the text
 * Redis runs differ from the file, so a file's SHA1 would no longer be the EVALSHA digest that
 * `scriptDigests` and SCRIPT EXISTS speak of; and a build step cannot do it alone, since the tests run src/lua
 * as it is and the build (scripts/copy-lua.mjs) only copies. The shared lines also differ per script (the
 * fields read, the states allowed), so an include would save a line or two in each. Redis Functions share
 * code, but need Redis 7 and a FUNCTION LOAD on every master of a Cluster. A copy that drifts fails the store
 * conformance suite, which sends every owner write a former owner's token.
 */
export async function readScriptFiles(): Promise<ScriptFile[]> {
  // Next to this module: src/lua in the sources, dist/lua once built (the build copies them).
  const dir = new URL("./lua/", import.meta.url);
  const names = await readdir(dir);
  return Promise.all(
    SCRIPT_NAMES.map(async (name) => {
      const found = names
        .map((file) => new RegExp(`^${name}-(\\d+)\\.lua$`).exec(file))
        .filter((match) => match !== null);
      const match = found[0];
      if (found.length !== 1 || match === undefined) {
        throw new Error(
          `expected exactly one ${name}-<numberOfKeys>.lua in ${dir.pathname}, found ${found.length}`,
        );
      }
      const lua = await readFile(new URL(match[0], dir), "utf8");
      const sha1 = createHash("sha1").update(lua).digest("hex");
      return { name, command: commandName(name), numberOfKeys: Number(match[1]), lua, sha1 };
    }),
  );
}
