import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const testRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** One JSON line a chaos child printed. */
export interface ChildEvent {
  e: string;
  at: number;
  [field: string]: unknown;
}

const running = new Set<ChaosChild>();
let exitHookInstalled = false;

/**
 * A worker or orchestrator process of the chaos suite (`node --import tsx <script>`), its JSON lines
 * collected. Every one started is stopped by `stopAll()`, and killed synchronously if the suite exits first.
 */
export class ChaosChild {
  readonly events: ChildEvent[] = [];
  readonly #child: ChildProcess;
  readonly #exited: Promise<void>;
  readonly #listeners = new Set<(event: ChildEvent) => void>();
  #stderr = "";
  #frozen = false;

  private constructor(
    readonly name: string,
    child: ChildProcess,
    onEvent: ((child: ChaosChild, event: ChildEvent) => void) | undefined,
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
        newline = buffered.indexOf("\n");
        if (line === "") continue;
        let event: ChildEvent;
        try {
          event = JSON.parse(line) as ChildEvent;
        } catch {
          this.#stderr = `${this.#stderr}[stdout] ${line}\n`.slice(-8000);
          continue;
        }
        this.events.push(event);
        onEvent?.(this, event);
        for (const listener of this.#listeners) listener(event);
      }
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString("utf8")).slice(-8000);
    });
  }

  /** Spawns `script` (relative to test/) with `env` added; resolves when it prints `readyEvent`. */
  static async start(options: {
    name: string;
    script: string;
    env: Record<string, string>;
    readyEvent: string;
    onEvent?: (child: ChaosChild, event: ChildEvent) => void;
    timeoutMs?: number;
  }): Promise<ChaosChild> {
    const child = spawn(process.execPath, ["--import", "tsx", options.script], {
      cwd: testRoot,
      env: { ...process.env, ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    const chaosChild = new ChaosChild(options.name, child, options.onEvent);
    running.add(chaosChild);
    installExitHook();
    try {
      await chaosChild.waitFor(options.readyEvent, options.timeoutMs ?? 60_000);
    } catch (error) {
      await chaosChild.kill();
      throw error;
    }
    return chaosChild;
  }

  get pid(): number {
    return this.#child.pid ?? 0;
  }

  get alive(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  get frozen(): boolean {
    return this.#frozen && this.alive;
  }

  get exited(): Promise<void> {
    return this.#exited;
  }

  get exitCode(): number | null {
    return this.#child.exitCode;
  }

  stderr(): string {
    return this.#stderr;
  }

  /** The first event named `name` (already printed or still to come). */
  waitFor(name: string, timeoutMs = 60_000): Promise<ChildEvent> {
    const seen = this.events.find((event) => event.e === name);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.#listeners.delete(listener);
        this.#child.off("exit", onExit);
      };
      const listener = (event: ChildEvent) => {
        if (event.e !== name) return;
        done();
        resolve(event);
      };
      const onExit = () => {
        done();
        reject(new Error(`${this.name} exited before "${name}"; stderr:\n${this.#stderr.trim()}`));
      };
      const timer = setTimeout(() => {
        done();
        reject(
          new Error(`${this.name}: no "${name}" within ${timeoutMs} ms; stderr:\n${this.#stderr.trim()}`),
        );
      }, timeoutMs);
      this.#listeners.add(listener);
      this.#child.once("exit", onExit);
    });
  }

  /** SIGKILL (or `signal`), then waits for the exit. */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    if (this.alive) this.#child.kill(signal);
    await this.#exited;
    running.delete(this);
  }

  freeze(): void {
    if (!this.alive) return;
    this.#child.kill("SIGSTOP");
    this.#frozen = true;
  }

  thaw(): void {
    if (!this.alive) return;
    this.#child.kill("SIGCONT");
    this.#frozen = false;
  }

  /** SIGTERM (after SIGCONT if frozen); SIGKILL if it has not exited within 5 s. */
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

  /** Stops every chaos child this process started and has not stopped yet. */
  static async stopAll(): Promise<void> {
    await Promise.all([...running].map((child) => child.stop()));
  }

  #killSync(): void {
    if (this.alive) this.#child.kill("SIGKILL");
  }

  static killAllSync(): void {
    for (const child of running) child.#killSync();
  }
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => ChaosChild.killAllSync());
}
