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

// What ioredis keeps on a client after defineCommand; not in its public types.
interface DefinedScripts {
  scriptsSet?: Record<string, { lua?: string } | undefined>;
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
  const defined = (client as unknown as DefinedScripts).scriptsSet ?? {};
  for (const script of scripts) {
    const existing = defined[script.command];
    if (existing === undefined) {
      client.defineCommand(script.command, { lua: script.lua, numberOfKeys: script.numberOfKeys });
    } else if (existing.lua !== script.lua) {
      // Same versioned name, different Lua: two builds of @once/redis that forgot to bump SCRIPT_VERSION.
      throw new RedisScriptError(
        script.command,
        "this client already has a different script under that name (two builds of @once/redis with the " +
          "same script version share it)",
      );
    }
  }
  const commands = client as unknown as Record<string, ScriptCommand | undefined>;
  return (script, key, args) => {
    const command = commands[commandName(script)];
    if (command === undefined)
      throw new RedisScriptError(commandName(script), "not registered on this client");
    return command.call(client, key, ...args);
  };
}

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
