import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";

/** One JSON line a child printed on stdout. */
export type ChildEvent = Record<string, unknown>;

/** An event's name (the value of the child's event key), or a predicate on the event. */
export type EventMatch<E extends ChildEvent = ChildEvent> = string | ((event: E) => boolean);

/** How a child ended: its exit code, or the signal that ended it. */
export type ExitStatus = [code: number | null, signal: NodeJS.Signals | null];

export interface NodeChildOptions<E extends ChildEvent = ChildEvent> {
  /** The script `node` runs. */
  script: string;
  args?: readonly string[];
  /** Node's own flags, before the script: `["--import", "tsx"]` runs TypeScript. */
  nodeArgs?: readonly string[];
  cwd?: string;
  /** The child's whole environment (default this process's). */
  env?: NodeJS.ProcessEnv;
  /** Its name in messages (default the script's file name). */
  name?: string;
  /** The field of each JSON line that names the event (default `type`). */
  eventKey?: string;
  /** Keeps a pipe to its stdin open while it runs, for a child that exits when its stdin ends. */
  holdStdin?: boolean;
  /** How long `stop()` waits after SIGTERM before it sends SIGKILL (default 10 s). */
  stopGraceMs?: number;
  /** Called with each event as it comes, before `waitFor` sees it. */
  onEvent?: (event: E, child: NodeChild<E>) => void;
  /** Called with each line of its stderr and each stdout line that is not JSON (default: only kept). */
  onOutput?: (line: string) => void;
}

const OUTPUT_KEPT = 8000;
const EVENTS_IN_MESSAGES = 20;
const running = new Set<{ stop(): Promise<unknown>; killSync(): void }>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // A child outliving its test process would hold ports and keys: SIGKILL every one still running.
  process.once("exit", () => {
    for (const child of running) child.killSync();
  });
}

/**
 * A Node child process whose stdout is JSON lines, one event each, named by one field (`eventKey`): its
 * events are collected, can be waited for, and it can be killed, frozen (SIGSTOP), thawed and stopped.
 * Every child still running when this process exits is killed.
 */
export class NodeChild<E extends ChildEvent = ChildEvent> {
  readonly name: string;
  readonly #child: ChildProcess;
  readonly #events: E[] = [];
  readonly #eventKey: string;
  readonly #stopGraceMs: number;
  readonly #listeners = new Set<(event: E) => void>();
  readonly #waiters = new Set<(event: E) => void>();
  readonly #closeListeners = new Set<() => void>();
  readonly #exited: Promise<ExitStatus>;
  #closed = false;
  #output = "";
  #frozen = false;

  private constructor(options: NodeChildOptions<E>) {
    this.name = options.name ?? path.basename(options.script);
    this.#eventKey = options.eventKey ?? "type";
    this.#stopGraceMs = options.stopGraceMs ?? 10_000;
    const child = spawn(
      process.execPath,
      [...(options.nodeArgs ?? []), options.script, ...(options.args ?? [])],
      {
        cwd: options.cwd,
        env: options.env ?? process.env,
        stdio: [options.holdStdin ? "pipe" : "ignore", "pipe", "pipe"],
      },
    );
    this.#child = child;
    this.#exited = new Promise((resolve) => {
      child.once("close", (code, signal) => resolve([code, signal]));
      child.once("error", (error) => {
        this.#keep(`[spawn] ${error.message}`);
        if (child.pid === undefined) resolve([null, null]);
      });
    });
    // Resolved on "close", after the last line of stdout has been read: what the child printed is all here.
    void this.#exited.then(() => {
      this.#closed = true;
      running.delete(this);
      for (const listener of [...this.#closeListeners]) listener();
    });
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      const text = line.trim();
      if (text !== "") this.#receive(text, options);
    });
    createInterface({ input: child.stderr as NodeJS.ReadableStream }).on("line", (line) => {
      this.#keep(line);
      options.onOutput?.(line);
    });
    running.add(this);
    installExitHook();
  }

  /** Starts `node [nodeArgs] script [args]`. */
  static start<E extends ChildEvent = ChildEvent>(options: NodeChildOptions<E>): NodeChild<E> {
    return new NodeChild(options);
  }

  /**
   * Starts it and resolves once it printed `ready` (an event name or a predicate); if it exits first or
   * does not get ready within `timeoutMs` (default 30 s), kills it and rejects.
   */
  static async startReady<E extends ChildEvent = ChildEvent>(
    options: NodeChildOptions<E> & { ready: EventMatch<E>; timeoutMs?: number },
  ): Promise<NodeChild<E>> {
    const child = new NodeChild(options);
    try {
      await child.waitFor(
        options.ready,
        options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs },
      );
    } catch (error) {
      await child.kill();
      throw error;
    }
    return child;
  }

  /** Stops every child this process started that is still running. */
  static async stopAll(): Promise<void> {
    await Promise.all([...running].map((child) => child.stop()));
  }

  get pid(): number {
    return this.#child.pid ?? 0;
  }

  /** Running (or frozen): it has not exited. */
  get alive(): boolean {
    return !this.#closed && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  get frozen(): boolean {
    return this.#frozen && this.alive;
  }

  /** Resolves with its exit once it has exited and its output has been read. */
  get exited(): Promise<ExitStatus> {
    return this.#exited;
  }

  get exitCode(): number | null {
    return this.#child.exitCode;
  }

  /** How many `waitFor` calls are still waiting: each stops listening once it resolves or rejects. */
  get waiting(): number {
    return this.#waiters.size;
  }

  /** Every event printed so far, in order. */
  get events(): readonly E[] {
    return this.#events;
  }

  /** The last lines of its stderr (and of stdout that was not JSON), for failure messages. */
  stderr(): string {
    return this.#output;
  }

  /** Events printed so far that match. */
  all(match: EventMatch<E>): E[] {
    return this.#events.filter(this.#matcher(match));
  }

  /** Calls `listener` with each event from now on; returns the function that stops it. */
  onEvent(listener: (event: E) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Resolves with the first event that matches, already printed or still to come; rejects if the child
   * exits first or after `timeoutMs` (default 30 s, a safety net: tests wait for events, not for time).
   * Its listeners are removed either way.
   */
  waitFor(match: EventMatch<E>, options: { timeoutMs?: number } = {}): Promise<E> {
    const test = this.#matcher(match);
    const seen = this.#events.find(test);
    if (seen) return Promise.resolve(seen);
    const wanted = typeof match === "string" ? `"${match}"` : "the awaited event";
    if (this.#closed) {
      return Promise.reject(new Error(`${this.name} exited before ${wanted}; ${this.#diagnostics()}`));
    }
    const timeoutMs = options.timeoutMs ?? 30_000;
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(listener);
        this.#closeListeners.delete(onClose);
      };
      const listener = (event: E) => {
        if (!test(event)) return;
        done();
        resolve(event);
      };
      const onClose = () => {
        done();
        reject(new Error(`${this.name} exited before ${wanted}; ${this.#diagnostics()}`));
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`${this.name}: no ${wanted} within ${timeoutMs} ms; ${this.#diagnostics()}`));
      }, timeoutMs);
      this.#waiters.add(listener);
      this.#closeListeners.add(onClose);
    });
  }

  /** Sends `signal` (default SIGKILL) and resolves once it has exited. */
  kill(signal: NodeJS.Signals = "SIGKILL"): Promise<ExitStatus> {
    if (this.alive) this.#child.kill(signal);
    return this.#exited;
  }

  /** SIGSTOP: the process stops dead, timers and sockets included. Nothing to do once it has exited. */
  freeze(): void {
    if (!this.alive) return;
    this.#child.kill("SIGSTOP");
    this.#frozen = true;
  }

  /** SIGCONT. */
  thaw(): void {
    if (!this.alive) return;
    this.#child.kill("SIGCONT");
    this.#frozen = false;
  }

  /** SIGTERM (after SIGCONT if frozen) for a clean close; SIGKILL if it has not exited within the grace. */
  async stop(): Promise<ExitStatus> {
    if (this.alive) {
      if (this.#frozen) this.thaw();
      this.#child.kill("SIGTERM");
      const timer = setTimeout(() => {
        if (this.alive) this.#child.kill("SIGKILL");
      }, this.#stopGraceMs);
      await this.#exited;
      clearTimeout(timer);
    }
    return this.#exited;
  }

  /** For the exit hook: SIGKILL, without waiting. */
  killSync(): void {
    if (this.alive) this.#child.kill("SIGKILL");
  }

  #matcher(match: EventMatch<E>): (event: E) => boolean {
    if (typeof match !== "string") return match;
    return (event) => event[this.#eventKey] === match;
  }

  #receive(text: string, options: NodeChildOptions<E>): void {
    let event: E;
    try {
      event = JSON.parse(text) as E;
    } catch {
      // Not an event (a library printing to stdout): kept with stderr.
      this.#keep(`[stdout] ${text}`);
      options.onOutput?.(text);
      return;
    }
    if (typeof event !== "object" || event === null) {
      this.#keep(`[stdout] ${text}`);
      options.onOutput?.(text);
      return;
    }
    this.#events.push(event);
    options.onEvent?.(event, this);
    for (const listener of [...this.#listeners]) listener(event);
    for (const waiter of [...this.#waiters]) waiter(event);
  }

  #keep(line: string): void {
    this.#output = `${this.#output}${line}\n`.slice(-OUTPUT_KEPT);
  }

  #diagnostics(): string {
    const recent = this.#events.slice(-EVENTS_IN_MESSAGES).map((event) => JSON.stringify(event));
    const skipped = this.#events.length - recent.length;
    return (
      `${skipped > 0 ? `last ${recent.length} of ${this.#events.length} events` : "events"}:\n  ${recent.join("\n  ")}\n` +
      `stderr:\n${this.#output.trim()}`
    );
  }
}
