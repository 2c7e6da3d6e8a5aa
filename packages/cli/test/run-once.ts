// Runs the built `once` binary (dist/main.js) as a child process, the way an operator or CI runs it.

import { spawn } from "node:child_process";
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

/** Runs the binary under `script(1)`, so its stdin is a terminal; `input` is typed into it. */
export function runOnceInTerminal(
  args: string[],
  input: string,
): Promise<{ code: number | null; output: string }> {
  const quoted = [process.execPath, BINARY, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
  return new Promise((resolve, reject) => {
    const child = spawn("script", ["-qec", quoted, "/dev/null"], { stdio: ["pipe", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
    // Typed once the prompt is up; typing earlier would be read anyway, but this is what a person does.
    setTimeout(() => child.stdin.end(input), 1_500);
  });
}
