import { LeaseLostError, type OnceStore } from "@once/core";

/**
 * Keeps an owner's lease alive with a heartbeat every third of the lease. `signal` aborts when the
 * lease is lost: the store said so, or no heartbeat has been confirmed for a whole lease (the owner
 * can no longer vouch that nobody took over). A confirmation counts from when its request was *sent*:
 * the store's lease began no earlier, so a stall before the answer was read cannot stretch it. Every local
 * judgement of the lease is on the monotonic clock (`performance.now()`): a wall-clock step (NTP) cannot
 * make a stale lease look fresh.
 */
export class Lease {
  /** Made when `signal` is first read (most tools never read it); `#lostWith` is the truth until then. */
  #controller: AbortController | undefined;
  #lostWith: LeaseLostError | undefined;
  readonly #store: OnceStore;
  readonly #key: string;
  readonly #token: string;
  readonly #leaseMs: number;
  #confirmedAt: number;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  /** `confirmedAt`: monotonic time at or before the store granted the lease (when the claim was sent). */
  constructor(
    store: OnceStore,
    key: string,
    token: string,
    leaseMs: number,
    confirmedAt = performance.now(),
  ) {
    this.#store = store;
    this.#key = key;
    this.#token = token;
    this.#leaseMs = leaseMs;
    this.#confirmedAt = confirmedAt;
    this.#schedule();
  }

  /** Monotonic time (`performance.now()`) at or before the store last granted or extended the lease. */
  get confirmedAt(): number {
    return this.#confirmedAt;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#lostWith) this.#controller.abort(this.#lostWith);
    }
    return this.#controller.signal;
  }

  /** True once the lease is lost: the store answered `lost`, or no heartbeat was confirmed for a whole lease. */
  get lost(): boolean {
    return this.#lostWith !== undefined;
  }

  /** True while not lost and more than half the lease is left since the last confirmation. */
  get fresh(): boolean {
    return this.#lostWith === undefined && performance.now() - this.#confirmedAt < this.#leaseMs / 2;
  }

  /**
   * Resolves when the lease is fresh, or stale but confirmed now by a heartbeat; throws {@link LeaseLostError}
   * otherwise. The last check before something leaves for the outside world.
   */
  async assert(): Promise<void> {
    if (!this.fresh && !(await this.confirm())) throw new LeaseLostError(this.#key, this.#token);
  }

  /**
   * Asks the store now (a heartbeat): true if the lease is still this owner's, and then fresh again. For an
   * owner that is about to start the effect and is no longer `fresh` (it stalled): it must not start on a
   * lease that may have run out while it slept.
   */
  async confirm(): Promise<boolean> {
    if (this.#lostWith) return false;
    const sentAt = performance.now();
    const answer = await this.#store.heartbeat(this.#key, this.#token, this.#leaseMs);
    if (answer.outcome !== "ok") {
      this.#abort(new LeaseLostError(this.#key, this.#token));
      return false;
    }
    this.#confirmedAt = Math.max(this.#confirmedAt, sentAt);
    return this.#lostWith === undefined;
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.#beat(), Math.max(1, Math.floor(this.#leaseMs / 3)));
  }

  async #beat(): Promise<void> {
    const sentAt = performance.now();
    try {
      const answer = await this.#store.heartbeat(this.#key, this.#token, this.#leaseMs);
      if (answer.outcome === "ok") this.#confirmedAt = Math.max(this.#confirmedAt, sentAt);
      else return this.#abort(new LeaseLostError(this.#key, this.#token));
    } catch (error) {
      // Redis unreachable: keep trying until a whole lease has gone by unconfirmed.
      if (performance.now() - this.#confirmedAt >= this.#leaseMs) {
        return this.#abort(new LeaseLostError(this.#key, this.#token), error);
      }
    }
    this.#schedule();
  }

  #abort(reason: LeaseLostError, cause?: unknown): void {
    if (cause !== undefined) (reason as { cause?: unknown }).cause = cause;
    this.stop();
    this.#lostWith ??= reason;
    this.#controller?.abort(reason);
  }
}
