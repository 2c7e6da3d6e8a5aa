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
}

type ScriptCommand = (...args: (string | number)[]) => Promise<unknown>;

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

type Pipeline = Record<string, (...args: (string | number)[]) => Pipeline> & {
  exec(): Promise<[Error | null, unknown][] | null>;
};

/** The Lua of each script registered on a client, by its versioned name. */
type Registered = WeakMap<Redis | Cluster, Map<string, string>>;

// One registry for every copy of @once/redis in the process (two builds can share a client, and each
// module copy has its own module scope), so it lives on globalThis under a registered symbol, as
// OpenTelemetry's API keeps its globals. Its key and shape are a contract between versions: keep both.
const REGISTERED = Symbol.for("@once/redis:registered-scripts");

function registered(client: Redis | Cluster): Map<string, string> {
  const global = globalThis as { [REGISTERED]?: Registered };
  global[REGISTERED] ??= new WeakMap();
  let scripts = global[REGISTERED].get(client);
  if (scripts === undefined) {
    scripts = new Map();
    global[REGISTERED].set(client, scripts);
  }
  return scripts;
}

let files: Promise<ScriptFile[]> | undefined;

/**
 * Registers every script on `client` with ioredis' `defineCommand` (EVALSHA, falling back to EVAL on
 * NOSCRIPT), under versioned names, and returns the function that runs them.
 */
export async function loadScripts(client: Redis | Cluster): Promise<RunScript> {
  files ??= readScriptFiles();
  const scripts = await files.catch((error: unknown) => {
    files = undefined;
    throw error;
  });
  const commands = client as unknown as Record<string, ScriptCommand | undefined>;
  const defined = registered(client);
  for (const script of scripts) {
    const existing = defined.get(script.command);
    if (existing === undefined) {
      if (commands[script.command] !== undefined) {
        // Defined by something that did not record its Lua here, so it cannot be shown to be ours.
        throw new RedisScriptError(
          script.command,
          "this client already has a command under that name that @once/redis did not register, so it may " +
            "run other Lua",
        );
      }
      client.defineCommand(script.command, { lua: script.lua, numberOfKeys: script.numberOfKeys });
      defined.set(script.command, script.lua);
    } else if (existing !== script.lua) {
      // Same versioned name, different Lua: two builds of @once/redis that forgot to bump SCRIPT_VERSION.
      throw new RedisScriptError(
        script.command,
        "this client already has a different script under that name (two builds of @once/redis with the " +
          "same script version share it)",
      );
    }
  }
  // Looked up once here, not per call: every store call runs one of these.
  const byScript = new Map(scripts.map((s) => [s.name, commands[s.command]]));
  return (script, key, args) => {
    const command = byScript.get(script);
    if (command === undefined)
      throw new RedisScriptError(commandName(script), "not registered on this client");
    return command.call(client, key, ...args);
  };
}

/** The confirmed form of a client's scripts (loaded first with {@link loadScripts}). */
export function confirmedRunner(client: Redis | Cluster): RunConfirmed {
  return async (script, key, args, { replicas, timeoutMs, fsync }) => {
    const pipeline = (client as unknown as { pipeline(): Pipeline }).pipeline();
    // Without a script, EXISTS gives the pipeline its key, so a Cluster routes the WAIT to that key's master.
    if (script === undefined) pipeline.exists?.(key);
    else pipeline[commandName(script)]?.(key, ...args);
    if (fsync) pipeline.call?.("WAITAOF", 1, replicas, timeoutMs);
    else pipeline.wait?.(replicas, timeoutMs);
    const replies = (await pipeline.exec()) ?? [];
    const [ran, waited] = replies;
    if (ran?.[0]) throw ran[0];
    if (waited?.[0]) throw waited[0];
    // WAITAOF answers [local fsyncs, replica fsyncs]: a write not fsynced here counts as not confirmed.
    const answer = waited?.[1];
    const [local, onReplicas] = Array.isArray(answer) ? answer.map(Number) : [1, Number(answer)];
    const acknowledged = (local ?? 0) >= 1 ? (onReplicas ?? 0) : 0;
    return { reply: ran?.[1], acknowledged };
  };
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
      return { name, command: commandName(name), numberOfKeys: Number(match[1]), lua };
    }),
  );
}
