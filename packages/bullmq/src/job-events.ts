import { QueueEvents } from "bullmq";
import { type AnyQueue, backendFactoryOf, lastEventId } from "./queue-backend.js";
import type { CallOutcome } from "./wire.js";

/** How a job settled, as its queue's events tell it. */
export type Settled =
  | { kind: "completed"; value: CallOutcome }
  | { kind: "failed"; reason: string }
  /** An enqueue found the job already there (BullMQ's `duplicated` event). */
  | { kind: "duplicated" };

/** One job's events as they come: `next` waits for the next one, up to a time. */
export interface JobWatch {
  next(timeoutMs: number): Promise<Settled | undefined>;
  stop(): void;
}

interface Closable {
  quit(): Promise<unknown>;
}

/**
 * A queue's job events, read from the newest one there when it opened, on a connection of its own, and handed
 * to whoever watches that job id. What the dispatcher knows of how BullMQ reports a job's end, in one place;
 * what it reads of BullMQ's backends is in queue-backend.ts.
 */
export class JobEvents {
  readonly #events: QueueEvents;
  readonly #owned: Closable | undefined;
  readonly #watchers = new Map<string, Set<(settled: Settled) => void>>();

  private constructor(events: QueueEvents, owned: Closable | undefined) {
    this.#events = events;
    this.#owned = owned;
    events.on("completed", ({ jobId, returnvalue }) =>
      this.#notify(jobId, { kind: "completed", value: returnvalue as CallOutcome }),
    );
    events.on("duplicated", ({ jobId }) => this.#notify(jobId, { kind: "duplicated" }));
    events.on("failed", ({ jobId, failedReason }) =>
      this.#notify(jobId, { kind: "failed", reason: failedReason }),
    );
  }

  static async open(queue: AnyQueue): Promise<JobEvents> {
    const connection = queue.opts.connection as { duplicate?: () => Closable };
    // QueueEvents blocks its connection: it needs one of its own.
    const owned = typeof connection.duplicate === "function" ? connection.duplicate() : undefined;
    // Read the queue's events from the last one there now, not from whenever the first blocking read goes
    // out ("$"): an event between now and then — a `duplicated` that carries a conflict, a completion — would
    // be missed, and the dispatcher would wait for an answer that already came.
    // The queue's own backend (Redis, or BullMQ's PostgreSQL backend): its events are read the same way.
    const events = new QueueEvents(
      queue.name,
      {
        connection: (owned ?? connection) as never,
        prefix: queue.opts.prefix,
        ...(await lastEventId(queue)),
      },
      backendFactoryOf(queue) as undefined,
    );
    const opened = new JobEvents(events, owned);
    try {
      await events.waitUntilReady();
    } catch (error) {
      await opened.close();
      throw error;
    }
    return opened;
  }

  /** Starts collecting the events of one job; `stop` when done with it. */
  watch(jobId: string): JobWatch {
    const queued: Settled[] = [];
    let wake: (() => void) | undefined;
    const listener = (settled: Settled) => {
      queued.push(settled);
      wake?.();
    };
    const listeners = this.#watchers.get(jobId) ?? new Set();
    this.#watchers.set(jobId, listeners);
    listeners.add(listener);
    return {
      next: async (timeoutMs) => {
        if (queued.length === 0) {
          let timer: NodeJS.Timeout | undefined;
          await new Promise<void>((resolve) => {
            wake = resolve;
            timer = setTimeout(resolve, timeoutMs);
          });
          clearTimeout(timer);
          wake = undefined;
        }
        return queued.shift();
      },
      stop: () => {
        listeners.delete(listener);
        if (listeners.size === 0) this.#watchers.delete(jobId);
      },
    };
  }

  async close(): Promise<void> {
    await this.#events.close();
    await this.#owned?.quit();
  }

  #notify(jobId: string, settled: Settled): void {
    for (const listener of this.#watchers.get(jobId) ?? []) listener(settled);
  }
}
