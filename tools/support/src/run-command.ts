// Runs a command to completion the way a shell would and keeps what it printed, for tests that drive the
// tools a user drives (pnpm, npm, npx, tsc, the once command): a non-zero exit is a result to assert on,
// not a throw.

import { spawn } from "node:child_process";

export interface CommandRun {
  /** The command line, for messages. */
  readonly command: string;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface CommandOptions {
  /** Default this process's working directory. */
  cwd?: string;
  /** The whole environment of the child (default this process's). */
  env?: NodeJS.ProcessEnv;
  /** Written to the child's stdin, a pipe (so never a terminal), which is then closed; default no stdin. */
  input?: string;
  /** SIGKILL after this long (default 120 s); the run then resolves with `signal: "SIGKILL"`. */
  timeoutMs?: number;
}

/** Runs `file args…` (no shell) and resolves with its exit code and output once it has exited. */
export function runCommand(
  file: string,
  args: readonly string[],
  options: CommandOptions = {},
): Promise<CommandRun> {
  const command = [file, ...args].join(" ");
  const cwd = options.cwd ?? process.cwd();
  return new Promise((resolve, reject) => {
    const child = spawn(file, [...args], {
      cwd,
      env: options.env ?? process.env,
      stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 120_000);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${command} in ${cwd}: ${error.message}`, { cause: error }));
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ command, code, signal, stdout, stderr });
    });
    if (options.input !== undefined) {
      // A child that exits without reading its stdin must not make the write fail the run.
      child.stdin?.on("error", () => {});
      child.stdin?.end(options.input);
    }
  });
}

/** A run's command, exit and last lines of output, for an assertion message. */
export function describeRun(run: CommandRun, lines = 40): string {
  const tail = (text: string) => text.trimEnd().split("\n").slice(-lines).join("\n");
  const exit = run.signal ? `killed by ${run.signal}` : `exit ${run.code}`;
  return `${run.command}: ${exit}\n--- stdout\n${tail(run.stdout)}\n--- stderr\n${tail(run.stderr)}`;
}
