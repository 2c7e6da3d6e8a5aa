import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";

/** A Node child process speaking JSON lines on stdout; stderr is passed through with a label. */
export class NodeProcess {
  readonly child: ChildProcess;
  readonly label: string;
  /** Resolves with [code, signal] when the process has exited. */
  readonly exited: Promise<[number | null, NodeJS.Signals | null]>;
  #lines: ((line: Record<string, unknown>) => void)[] = [];

  private constructor(child: ChildProcess, label: string, stderr: (line: string) => void) {
    this.child = child;
    this.label = label;
    this.exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
    // Swallowed here so a child that dies before anyone awaits `exited` is not an unhandled rejection.
    this.exited.catch(() => {});
    if (child.stdout) {
      createInterface({ input: child.stdout }).on("line", (text) => {
        let line: Record<string, unknown>;
        try {
          line = JSON.parse(text) as Record<string, unknown>;
        } catch {
          return stderr(`${label}: ${text}`);
        }
        for (const listener of this.#lines) listener(line);
      });
    }
    if (child.stderr)
      createInterface({ input: child.stderr }).on("line", (text) => stderr(`${label}: ${text}`));
  }

  /** Starts `node <main> …args`. */
  static start(
    main: string,
    args: readonly string[],
    options: { label: string; env?: NodeJS.ProcessEnv; stderr?: (line: string) => void },
  ): NodeProcess {
    const child = spawn(process.execPath, [main, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      env: options.env ?? process.env,
    });
    return new NodeProcess(
      child,
      options.label,
      options.stderr ?? ((line) => process.stderr.write(`${line}\n`)),
    );
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  onLine(listener: (line: Record<string, unknown>) => void): void {
    this.#lines.push(listener);
  }

  /** Resolves with the first line of `type`; rejects if the process exits first or `timeoutMs` passes. */
  waitForLine(type: string, timeoutMs = 30_000): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.label}: no '${type}' line within ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.onLine((line) => {
        if (line.type === type) {
          clearTimeout(timer);
          resolve(line);
        }
      });
      this.exited.then(([code, signal]) => {
        clearTimeout(timer);
        reject(new Error(`${this.label} exited (${signal ?? code}) before its '${type}' line`));
      });
    });
  }

  /** Sends `signal` to this process (and only this one). */
  kill(signal: NodeJS.Signals): void {
    if (this.running) this.child.kill(signal);
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.running) return;
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}
