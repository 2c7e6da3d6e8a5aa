import { type Cancellation, LeaseLostError, type OnceStore, TaskCancelledError } from "@once/core";
import type { LivenessHold } from "./liveness.js";

/**
 * Keeps an owner's lease alive with a heartbeat every third of the lease. `signal` aborts when the
 * lease is lost: the store said so, or no heartbeat has been confirmed for a whole lease (the owner
 * can no longer vouch that nobody took over). A confirmation counts from when its request was *sent*:
 * the store's lease began no earlier, so a stall before the answer was read cannot stretch it. Every local
 * judgement of the lease is on the monotonic clock (`performance.now()`): a wall-clock step (NTP) cannot
 * make a stale lease look fresh.
 *
 * `signal` also aborts when the owner's task is cancelled (docs/cancellation.md), with a
 * {@link TaskCancelledError} as its reason: a heartbeat answered `cancelRequested` (the effect was running when
 * the cancel came; the lease stays this owner's, and keeps beating until the flow settles the call), or a
 * write was `lost` because the cancel turned the record `cancelled` (the lease is lost too).
 *
 * When the claim named its process's liveness entry (docs/protocol.md, "Liveness"), another owner may take
 * over as soon as that entry is gone, however much lease is left: the lease is then only as fresh as the
 * entry too, and it is lost when the entry is.
 */
export class Lease {
  /** Made when `signal` is first read (most tools never read it); `#abortedWith` is the truth until then. */
  #controller: AbortController | undefined;
  #lostWith: LeaseLostError | TaskCancelledError | undefined;
  #cancelledWith: TaskCancelledError | undefined;
  readonly #store: OnceStore;
  readonly #key: string;
  readonly #token: string;
  readonly #leaseMs: number;
  /** The task the call belongs to, when its claim named it: only then can a heartbeat say it was cancelled. */
  readonly #taskId: string | undefined;
  #confirmedAt: number;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  readonly #liveness: LivenessHold | undefined;
  readonly #livenessLost = () => this.#abort(new LeaseLostError(this.#key, this.#token));

  /** `confirmedAt`: monotonic time at or before the store granted the lease (when the claim was sent). */
  constructor(
    store: OnceStore,
    key: string,
    token: string,
    leaseMs: number,
    confirmedAt = performance.now(),
    taskId?: string,
    liveness?: LivenessHold,
  ) {
    this.#store = store;
    this.#key = key;
    this.#token = token;
    this.#leaseMs = leaseMs;
    this.#confirmedAt = confirmedAt;
    this.#taskId = taskId;
    this.#liveness = liveness;
    liveness?.onLost(this.#livenessLost);
    this.#schedule();
  }

  /** Monotonic time (`performance.now()`) at or before the store last granted or extended the lease. */
  get confirmedAt(): number {
    return this.#confirmedAt;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      const reason = this.#abortedWith;
      if (reason) this.#controller.abort(reason);
    }
    return this.#controller.signal;
  }

  /** True once the lease is lost: the store answered `lost`, or no heartbeat was confirmed for a whole lease. */
  get lost(): boolean {
    return this.#lostWith !== undefined;
  }

  /**
   * Why the lease was lost: {@link LeaseLostError}, or {@link TaskCancelledError} when the record it was lost
   * to is `cancelled`. Undefined while the lease is this owner's.
   */
  get lostWith(): LeaseLostError | TaskCancelledError | undefined {
    return this.#lostWith;
  }

  /** Set once the store said the task was cancelled while this owner held the lease (held or lost since). */
  get cancelled(): TaskCancelledError | undefined {
    return this.#cancelledWith ?? (this.#lostWith instanceof TaskCancelledError ? this.#lostWith : undefined);
  }

  get #abortedWith(): LeaseLostError | TaskCancelledError | undefined {
    return this.#cancelledWith ?? this.#lostWith;
  }

  /**
   * True while not lost and more than half the lease is left since the last confirmation — and, when the
   * claim named a liveness entry, more than half of the entry's time since it was last confirmed.
   */
  get fresh(): boolean {
    return (
      this.#lostWith === undefined &&
      performance.now() - this.#confirmedAt < this.#leaseMs / 2 &&
      (this.#liveness === undefined || this.#liveness.fresh)
    );
  }

  /**
   * Resolves when the lease is fresh, or stale but confirmed now by a heartbeat; throws {@link LeaseLostError}
   * otherwise. The last check before something leaves for the outside world.
   */
  async assert(): Promise<void> {
    if (!this.fresh && !(await this.confirm()))
      throw this.#lostWith ?? new LeaseLostError(this.#key, this.#token);
  }

  /**
   * Asks the store now (a heartbeat): true if the lease is still this owner's, and then fresh again. For an
   * owner that is about to start the effect and is no longer `fresh` (it stalled): it must not start on a
   * lease that may have run out while it slept.
   */
  async confirm(): Promise<boolean> {
    if (this.#lostWith) return false;
    // The entry first: gone, this owner may have been taken over whatever its lease says.
    if (this.#liveness !== undefined && !this.#liveness.fresh && !(await this.#liveness.confirm())) {
      this.#abort(new LeaseLostError(this.#key, this.#token));
      return false;
    }
    const sentAt = performance.now();
    const answer = await this.#store.heartbeat(this.#key, this.#token, this.#leaseMs);
    if (answer.outcome !== "ok") {
      this.#abort(await this.#whyLost());
      return false;
    }
    this.#confirmedAt = Math.max(this.#confirmedAt, sentAt);
    if (answer.cancelRequested) await this.#cancelRequested();
    return this.#lostWith === undefined;
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#liveness?.offLost(this.#livenessLost);
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.#beat(), Math.max(1, Math.floor(this.#leaseMs / 3)));
  }

  async #beat(): Promise<void> {
    const sentAt = performance.now();
    try {
      const answer = await this.#store.heartbeat(this.#key, this.#token, this.#leaseMs);
      if (answer.outcome !== "ok") return this.#abort(await this.#whyLost());
      this.#confirmedAt = Math.max(this.#confirmedAt, sentAt);
      if (answer.cancelRequested) await this.#cancelRequested();
    } catch (error) {
      // Redis unreachable: keep trying until a whole lease has gone by unconfirmed.
      if (performance.now() - this.#confirmedAt >= this.#leaseMs) {
        return this.#abort(new LeaseLostError(this.#key, this.#token), error);
      }
    }
    this.#schedule();
  }

  #abort(reason: LeaseLostError | TaskCancelledError, cause?: unknown): void {
    if (cause !== undefined) (reason as { cause?: unknown }).cause = cause;
    this.stop();
    this.#lostWith ??= reason;
    this.#controller?.abort(this.#abortedWith);
  }

  /**
   * The task was cancelled while the effect may be running: the tool is told (its signal aborts), the lease
   * stays this owner's and keeps beating, so the flow settles the call as usual whatever the tool does.
   */
  async #cancelRequested(): Promise<void> {
    if (this.#cancelledWith) return;
    const record = await this.#store.get(this.#key).catch(() => undefined);
    this.#cancelledWith ??= taskCancelled(this.#key, this.#taskId, record?.cancellation);
    this.#controller?.abort(this.#cancelledWith);
  }

  /** A write was `lost`: to a cancel (the record is now `cancelled`), or to another owner. */
  async #whyLost(): Promise<LeaseLostError | TaskCancelledError> {
    if (this.#taskId !== undefined) {
      const record = await this.#store.get(this.#key).catch(() => undefined);
      if (record?.state === "cancelled") return taskCancelled(this.#key, this.#taskId, record.cancellation);
    }
    return new LeaseLostError(this.#key, this.#token);
  }
}

/**
 * The error of a call of a cancelled task, from the cancellation its record keeps. A record that could not be
 * read a moment after the store said the task was cancelled still stops the call, with what is known.
 */
export function taskCancelled(
  key: string,
  taskId: string | undefined,
  cancellation: Cancellation | undefined,
): TaskCancelledError {
  const { by, why, at } = cancellation ?? { by: "(unknown)", why: "", at: Date.now() };
  return new TaskCancelledError(key, taskId, by, why, at);
}
