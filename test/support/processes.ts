// Worker child processes for the scenario tests: test/fixtures/worker-process.ts run with
// `node --import tsx`, its JSON event lines collected so a test can wait for "charged" and SIGKILL the
// process on that line, freeze it with SIGSTOP, or count what it did.
//
// Every process started here is stopped by stopAllWorkerProcesses() (call it in afterEach/afterAll), and
// killed synchronously when the test process exits.

import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { WORKER_CONFIG_ENV, type WorkerProcessConfig } from "../fixtures/worker-config.js";

const testRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const fixture = path.join(testRoot, "fixtures/worker-process.ts");

/** One line a worker printed. */
export interface WorkerEvent {
  event: string;
  pid: number;
  at: number;
  [field: string]: unknown;
}

export type EventMatch = string | ((event: WorkerEvent) => boolean);

export interface WorkerProcess {
  readonly name: string;
  readonly pid: number;
  /** Every event printed so far, in order. */
  readonly events: readonly WorkerEvent[];
  /** Resolves with the first event (already printed or still to come) that matches. */
  waitFor(match: EventMatch, options?: { timeoutMs?: number }): Promise<WorkerEvent>;
  /** Events printed so far that match. */
  all(match: EventMatch): WorkerEvent[];
  /** SIGKILL (or `signal`), then waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** SIGSTOP: the process stops dead, timers and sockets included. */
  freeze(): void;
  /** SIGCONT. */
  thaw(): void;
  /** SIGTERM (after SIGCONT if frozen) for a clean close; SIGKILL if it has not exited within 5 s. */
  stop(): Promise<void>;
  /** The last lines of its stderr, for failure messages. */
  stderr(): string;
}

const running = new Set<WorkerChild>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const child of running) child.killSync();
  });
}

function matcher(match: EventMatch): (event: WorkerEvent) => boolean {
  return typeof match === "string" ? (event) => event.event === match : match;
}

class WorkerChild implements WorkerProcess {
  readonly events: WorkerEvent[] = [];
  readonly #child: ChildProcess;
  readonly #exited: Promise<void>;
  readonly #listeners = new Set<(event: WorkerEvent) => void>();
  #stderr = "";
  #frozen = false;

  constructor(
    readonly name: string,
    child: ChildProcess,
  ) {
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once("exit", () => resolve()));
    let buffered = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("utf8");
      let newline = buffered.indexOf("\n");
      while (newline >= 0) {
        const line = buffered.slice(0, newline).trim();
        buffered = buffered.slice(newline + 1);
        if (line !== "") this.#receive(line);
        newline = buffered.indexOf("\n");
      }
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString("utf8")).slice(-6000);
    });
    child.on("error", (error) => {
      this.#stderr = `${this.#stderr}[spawn] ${error.message}\n`.slice(-6000);
    });
  }

  get pid(): number {
    return this.#child.pid ?? 0;
  }

  get alive(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  #receive(line: string): void {
    let event: WorkerEvent;
    try {
      event = JSON.parse(line) as WorkerEvent;
    } catch {
      // Not ours (a library printing to stdout): keep it with stderr for diagnostics.
      this.#stderr = `${this.#stderr}[stdout] ${line}\n`.slice(-6000);
      return;
    }
    this.events.push(event);
    for (const listener of this.#listeners) listener(event);
  }

  all(match: EventMatch): WorkerEvent[] {
    return this.events.filter(matcher(match));
  }

  waitFor(match: EventMatch, options: { timeoutMs?: number } = {}): Promise<WorkerEvent> {
    const test = matcher(match);
    const seen = this.events.find(test);
    if (seen) return Promise.resolve(seen);
    const timeoutMs = options.timeoutMs ?? 30_000;
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.#listeners.delete(listener);
        this.#child.off("exit", onExit);
      };
      const listener = (event: WorkerEvent) => {
        if (!test(event)) return;
        done();
        resolve(event);
      };
      const onExit = () => {
        done();
        reject(new Error(`${this.name} exited before the awaited event; ${this.#diagnostics()}`));
      };
      // A safety net only: the scenarios wait for events, never for time.
      const timer = setTimeout(() => {
        done();
        reject(new Error(`${this.name}: no matching event within ${timeoutMs} ms; ${this.#diagnostics()}`));
      }, timeoutMs);
      this.#listeners.add(listener);
      this.#child.once("exit", onExit);
    });
  }

  #diagnostics(): string {
    const events = this.events.map((e) => JSON.stringify(e)).join("\n  ");
    return `events:\n  ${events}\nstderr:\n${this.#stderr.trim()}`;
  }

  stderr(): string {
    return this.#stderr;
  }

  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    if (this.alive) this.#child.kill(signal);
    await this.#exited;
    running.delete(this);
  }

  freeze(): void {
    if (!this.alive) throw new Error(`${this.name} is not running`);
    this.#child.kill("SIGSTOP");
    this.#frozen = true;
  }

  thaw(): void {
    if (!this.alive) throw new Error(`${this.name} is not running`);
    this.#child.kill("SIGCONT");
    this.#frozen = false;
  }

  async stop(): Promise<void> {
    if (this.alive) {
      if (this.#frozen) this.thaw();
      this.#child.kill("SIGTERM");
      const timedOut = await Promise.race([
        this.#exited.then(() => false),
        new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 5_000).unref()),
      ]);
      if (timedOut && this.alive) this.#child.kill("SIGKILL");
    }
    await this.#exited;
    running.delete(this);
  }

  killSync(): void {
    if (this.alive) this.#child.kill("SIGKILL");
  }
}

let counter = 0;

/**
 * Starts a worker process with `config` and resolves when it printed `ready` (its worker is listening).
 * Rejects, after killing it, if it exits or does not get ready within 30 s.
 */
export async function startWorkerProcess(
  config: WorkerProcessConfig,
  options: { name?: string } = {},
): Promise<WorkerProcess> {
  counter += 1;
  const name = options.name ?? `worker-${counter}`;
  const child = spawn(process.execPath, ["--import", "tsx", fixture], {
    // `--import tsx` resolves from the working directory: test/ has tsx in its node_modules.
    cwd: testRoot,
    env: { ...process.env, [WORKER_CONFIG_ENV]: JSON.stringify(config) },
    stdio: ["pipe", "pipe", "pipe"],
  });
  const worker = new WorkerChild(name, child);
  running.add(worker);
  installExitHook();
  try {
    await worker.waitFor("ready");
  } catch (error) {
    await worker.kill();
    throw error;
  }
  return worker;
}

/** Stops every worker process this test process started and has not stopped yet. */
export async function stopAllWorkerProcesses(): Promise<void> {
  await Promise.all([...running].map((worker) => worker.stop()));
}
