import { LeaseLostError, type OnceStore } from "@once/core";

/**
 * Keeps an owner's lease alive with a heartbeat every third of the lease. `signal` aborts when the
 * lease is lost: the store said so, or no heartbeat has been confirmed for a whole lease (the owner
 * can no longer vouch that nobody took over).
 */
export class Lease {
  readonly #controller = new AbortController();
  readonly #store: OnceStore;
  readonly #key: string;
  readonly #token: string;
  readonly #leaseMs: number;
  #confirmedAt = Date.now();
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(store: OnceStore, key: string, token: string, leaseMs: number) {
    this.#store = store;
    this.#key = key;
    this.#token = token;
    this.#leaseMs = leaseMs;
    this.#schedule();
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** True once the store answered `lost`: another owner holds the key. */
  get lost(): boolean {
    return this.#controller.signal.reason instanceof LeaseLostError;
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
    try {
      const answer = await this.#store.heartbeat(this.#key, this.#token, this.#leaseMs);
      if (answer.outcome === "ok") this.#confirmedAt = Date.now();
      else return this.#abort(new LeaseLostError(this.#key, this.#token));
    } catch (error) {
      // Redis unreachable: keep trying until a whole lease has gone by unconfirmed.
      if (Date.now() - this.#confirmedAt >= this.#leaseMs) {
        return this.#abort(new LeaseLostError(this.#key, this.#token), error);
      }
    }
    this.#schedule();
  }

  #abort(reason: LeaseLostError, cause?: unknown): void {
    if (cause !== undefined) (reason as { cause?: unknown }).cause = cause;
    this.stop();
    this.#controller.abort(reason);
  }
}
