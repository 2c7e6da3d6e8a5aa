import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";

/** A Node child process whose stdout is JSON lines, for the tests: collects lines, waits for one. */
export class NodeChild {
  readonly process: ChildProcess;
  readonly lines: Record<string, unknown>[] = [];
  readonly exited: Promise<[number | null, NodeJS.Signals | null]>;
  stderr = "";
  readonly #waiters = new Set<() => void>();

  constructor(main: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env) {
    this.process = spawn(process.execPath, [main, ...args], { stdio: ["ignore", "pipe", "pipe"], env });
    this.exited = once(this.process, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
    this.exited.catch(() => {});
    createInterface({ input: this.process.stdout as NodeJS.ReadableStream }).on("line", (text) => {
      try {
        this.lines.push(JSON.parse(text) as Record<string, unknown>);
      } catch {
        this.stderr += `${text}\n`;
      }
      for (const wake of this.#waiters) wake();
    });
    this.process.stderr?.on("data", (chunk: Buffer) => {
      this.stderr += chunk;
    });
  }

  /** The first line matching `predicate` (already received or still to come). */
  waitForLine(
    predicate: (line: Record<string, unknown>) => boolean,
    timeoutMs = 30_000,
  ): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.lines.find(predicate);
        if (!found) return;
        done();
        resolve(found);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no such line within ${timeoutMs} ms; stderr:\n${this.stderr}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
      this.exited.then(() =>
        setTimeout(() => {
          if (!this.#waiters.has(check)) return;
          done();
          reject(new Error(`exited before the line; stderr:\n${this.stderr}`));
        }, 50),
      );
      check();
    });
  }

  /** SIGTERM (then SIGKILL after 10 s) and wait for the exit. */
  async stop(): Promise<[number | null, NodeJS.Signals | null]> {
    if (this.process.exitCode === null && this.process.signalCode === null) {
      this.process.kill("SIGTERM");
      const timer = setTimeout(() => this.process.kill("SIGKILL"), 10_000);
      const result = await this.exited;
      clearTimeout(timer);
      return result;
    }
    return this.exited;
  }
}

/** Deletes every key under `root`. */
export async function deleteKeys(
  redis: { keys(pattern: string): Promise<string[]>; unlink(...keys: string[]): Promise<number> },
  root: string,
): Promise<void> {
  const keys = await redis.keys(`${root}*`);
  if (keys.length > 0) await redis.unlink(...keys);
}
