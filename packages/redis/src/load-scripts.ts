import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import type { Cluster, Redis } from "ioredis";
import { RedisScriptError } from "./errors.js";
import { replyText } from "./record-bytes.js";
import { commandName, SCRIPT_NAMES, type ScriptName } from "./script-names.js";

/** What a script takes after its keys: text, numbers, and the bytes of a fingerprint or a traceparent. */
export type ScriptArg = string | number | Buffer;

/**
 * Runs one of once's scripts on its key (or keys, in the order of its contract); resolves with its reply, its
 * strings as text (the replies of BYTES_REPLIES are read as bytes and turned into text by record-bytes.ts).
 */
export type RunScript = (
  script: ScriptName,
  keys: string | readonly string[],
  args: readonly ScriptArg[],
) => Promise<unknown>;

/** The scripts whose replies can carry a fingerprint's or a traceparent's bytes (record-bytes.ts reads them). */
export const BYTES_REPLIES: ReadonlySet<ScriptName> = new Set(["claim", "claim-filed", "get", "read-task"]);

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
  keys: string | readonly string[],
  args: readonly ScriptArg[],
  confirmation: Confirmation,
) => Promise<Confirmed>;

/** The two ways a store runs its scripts on one client. */
export interface Scripts {
  run: RunScript;
  runConfirmed: RunConfirmed;
}

type Pipeline = Record<string, (...args: ScriptArg[]) => Pipeline> & {
  exec(): Promise<[Error | null, unknown][] | null>;
};

type Eval = (script: string, numberOfKeys: number, ...args: ScriptArg[]) => Promise<unknown>;

let files: Promise<ScriptFile[]> | undefined;

/**
 * Reads every script once per process and returns the functions that run them on `client`: `EVALSHA` by
 * each script's SHA1, and `EVAL` of its text when the server's script cache lacks it (NOSCRIPT: a restart, a
 * failover, a `SCRIPT FLUSH`), which caches it again. Addressed by digest, two builds of @once/redis sharing
 * one client each run their own Lua, whatever their versions; ioredis' `defineCommand` would do the same
 * fallback but add a closure, a WeakSet lookup and a copy of the arguments to every call.
 */
export async function loadScripts(client: Redis | Cluster): Promise<Scripts> {
  const scripts = await scriptFiles();
  const byName = new Map(scripts.map((file) => [file.name, file]));
  const fileOf = (script: ScriptName): ScriptFile => {
    const file = byName.get(script);
    if (file === undefined) throw new RedisScriptError(commandName(script), "no such script in this build");
    return file;
  };
  const asText = { evalsha: client.evalsha.bind(client) as Eval, eval: client.eval.bind(client) as Eval };
  const asBytes = {
    evalsha: ((...args) => client.callBuffer("EVALSHA", ...args)) as Eval,
    eval: ((...args) => client.callBuffer("EVAL", ...args)) as Eval,
  };

  const run: RunScript = (script, keys, args) => {
    const { sha1, lua, numberOfKeys } = fileOf(script);
    const named = typeof keys === "string" ? [keys] : keys;
    if (!BYTES_REPLIES.has(script))
      return asText.evalsha(sha1, numberOfKeys, ...named, ...args).catch((error: unknown) => {
        if (!isNoScript(error)) throw error;
        return asText.eval(lua, numberOfKeys, ...named, ...args);
      });
    return asBytes.evalsha(sha1, numberOfKeys, ...named, ...args).then(
      (reply) => replyText(script, reply),
      (error: unknown) => {
        if (!isNoScript(error)) throw error;
        return asBytes.eval(lua, numberOfKeys, ...named, ...args).then((reply) => replyText(script, reply));
      },
    );
  };

  const runConfirmed: RunConfirmed = async (script, keys, args, confirmation) => {
    const file = script === undefined ? undefined : fileOf(script);
    const named = typeof keys === "string" ? [keys] : keys;
    let replies = await confirmedPipeline(client, file, "evalsha", named, args, confirmation);
    if (file !== undefined && isNoScript(replies[0]?.[0]))
      replies = await confirmedPipeline(client, file, "eval", named, args, confirmation);
    const [ran, waited] = replies;
    if (ran?.[0]) throw ran[0];
    if (waited?.[0]) throw waited[0];
    // WAITAOF answers [local fsyncs, replica fsyncs]: a write not fsynced here counts as not confirmed.
    const answer = waited?.[1];
    const [local, onReplicas] = Array.isArray(answer) ? answer.map(Number) : [1, Number(answer)];
    const acknowledged = (local ?? 0) >= 1 ? (onReplicas ?? 0) : 0;
    const reply =
      file !== undefined && BYTES_REPLIES.has(file.name) ? replyText(file.name, ran?.[1]) : ran?.[1];
    return { reply, acknowledged };
  };

  return { run, runConfirmed };
}

/** The script (or, without one, EXISTS on its key) and its WAIT / WAITAOF, in one pipeline. */
async function confirmedPipeline(
  client: Redis | Cluster,
  file: ScriptFile | undefined,
  how: "evalsha" | "eval",
  keys: readonly string[],
  args: readonly ScriptArg[],
  { replicas, timeoutMs, fsync }: Confirmation,
): Promise<[Error | null, unknown][]> {
  const pipeline = (client as unknown as { pipeline(): Pipeline }).pipeline();
  // Without a script, EXISTS gives the pipeline its key, so a Cluster routes the WAIT to that key's master.
  if (file === undefined) pipeline.exists?.(keys[0] ?? "");
  else {
    const script = how === "evalsha" ? file.sha1 : file.lua;
    if (BYTES_REPLIES.has(file.name))
      pipeline.callBuffer?.(how.toUpperCase(), script, file.numberOfKeys, ...keys, ...args);
    else pipeline[how]?.(script, file.numberOfKeys, ...keys, ...args);
  }
  if (fsync) pipeline.call?.("WAITAOF", 1, replicas, timeoutMs);
  else pipeline.wait?.(replicas, timeoutMs);
  return (await pipeline.exec()) ?? [];
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOSCRIPT");
}

/** readScriptFiles, read once per process (again after a failed read). */
export function scriptFiles(): Promise<ScriptFile[]> {
  files ??= readScriptFiles().catch((error: unknown) => {
    files = undefined;
    throw error;
  });
  return files;
}

/**
 * Every script, as Redis will run it: the files the build flattened into dist/lua (scripts/copy-lua.mjs
 * replaces each `--- @include` line of src/lua with the include's text), read as they are. Nothing is
 * resolved here, so a file's SHA1 is the EVALSHA digest that `scriptDigests` and SCRIPT EXISTS speak of, and
 * the text in the package is the text that runs. The tests, which run src/, read dist/lua too: their global
 * setup runs that build step first. Redis Functions share code too, but need Redis 7 and a FUNCTION
 * LOAD on every master of a Cluster.
 */
export async function readScriptFiles(): Promise<ScriptFile[]> {
  // Next to this module once built (dist/lua, wherever dist/ is copied to). Run from the TypeScript sources,
  // as the tests run it, the scripts next to it still have their includes: the build's are read instead.
  const dir = new URL(import.meta.url.endsWith(".ts") ? "../dist/lua/" : "./lua/", import.meta.url);
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
