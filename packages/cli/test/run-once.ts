// Runs the built `once` binary (dist/main.js) as a child process, the way an operator or CI runs it.

import path from "node:path";
import { fileURLToPath } from "node:url";
import { type CommandRun, runCommand } from "@once/support";

const packageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const BINARY = path.join(packageDir, "dist/main.js");

export type OnceRun = CommandRun;

export interface RunOptions {
  /** Environment on top of a clean one: REDIS_URL and REDIS_CLUSTER_NODES are removed unless given here. */
  env?: Record<string, string | undefined>;
  cwd?: string;
  /** Written to the child's stdin (a pipe, so never a terminal), then closed. */
  input?: string;
  timeoutMs?: number;
}

/** Runs `node dist/main.js ...args`; resolves with its exit code and output. */
export function runOnce(args: readonly string[], options: RunOptions = {}): Promise<OnceRun> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.REDIS_URL;
  delete env.REDIS_CLUSTER_NODES;
  for (const [name, value] of Object.entries(options.env ?? {})) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return runCommand(process.execPath, [BINARY, ...args], {
    cwd: options.cwd ?? packageDir,
    env,
    input: options.input ?? "",
    timeoutMs: options.timeoutMs ?? 20_000,
  });
}

/** The JSON a `--json` run printed on stdout. */
export function jsonOf<T = Record<string, unknown>>(run: OnceRun): T {
  try {
    return JSON.parse(run.stdout) as T;
  } catch {
    throw new Error(`stdout is not JSON (exit ${run.code}):\n${run.stdout}\nstderr:\n${run.stderr}`);
  }
}
