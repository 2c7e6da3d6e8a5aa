import type {
  ClaimOutcome,
  ClaimRequest,
  OnceRecord,
  OnceStore,
  ResolveRequest,
  StoredError,
  WriteOutcome,
} from "@once/core";

/** Where CountingStore adds one to a named counter. */
export interface Counters {
  increment(field: string): Promise<void>;
}

/**
 * A store that delegates every call to the real one and counts what came back: the demo's figures for
 * dedup hits, in-flight waits and reconciles are these counts, measured at the store boundary.
 *
 * Counters: `claim.<outcome>` for every claim answer; `get.done` for every look-up that found a finished
 * record (only dispatchers call `get`, so this counts calls the dispatcher answered from the store);
 * `reconcile.applied` / `reconcile.not_applied` / `reconcile.gave_up`; `unknown.marked`; `lost.<write>`
 * for owner writes refused because another owner holds the key. A counter that fails to write never fails
 * the call it counts: the figures are then low, never invented.
 */
export class CountingStore implements OnceStore {
  readonly #store: OnceStore;
  readonly #counters: Counters;

  private constructor(store: OnceStore, counters: Counters) {
    this.#store = store;
    this.#counters = counters;
  }

  /**
   * `store`, counted. The counted calls go through a CountingStore; every other method goes straight to
   * `store`, so the wrapper keeps whatever else the store can do (its process liveness entries, tasks,
   * approvals). A wrapper of OnceStore's methods alone would hide those: once would then run without them —
   * with no liveness entry, a killed worker's calls wait out their whole lease.
   */
  static wrap(store: OnceStore, counters: Counters): OnceStore {
    const counting = new CountingStore(store, counters);
    return new Proxy(counting, {
      get(target, name) {
        const own = name in target;
        const value = Reflect.get(own ? target : store, name);
        return typeof value === "function" ? value.bind(own ? target : store) : value;
      },
      has: (target, name) => name in target || name in store,
    });
  }

  get retentionMs(): number {
    return this.#store.retentionMs;
  }

  async claim(request: ClaimRequest): Promise<ClaimOutcome> {
    const outcome = await this.#store.claim(request);
    await this.#count(`claim.${outcome.outcome}`);
    return outcome;
  }

  beginEffect(key: string, token: string): Promise<WriteOutcome> {
    return this.#write("begin_effect", this.#store.beginEffect(key, token));
  }

  complete(key: string, token: string, result: string): Promise<WriteOutcome> {
    return this.#write("complete", this.#store.complete(key, token, result));
  }

  failTerminal(key: string, token: string, error: StoredError): Promise<WriteOutcome> {
    return this.#write("fail_terminal", this.#store.failTerminal(key, token, error));
  }

  release(key: string, token: string, options?: { notApplied?: boolean }): Promise<WriteOutcome> {
    return this.#write("release", this.#store.release(key, token, options));
  }

  markUnknown(key: string, token: string, error?: StoredError): Promise<WriteOutcome> {
    return this.#write("mark_unknown", this.#store.markUnknown(key, token, error), "unknown.marked");
  }

  heartbeat(key: string, token: string, leaseMs: number): Promise<WriteOutcome> {
    return this.#write("heartbeat", this.#store.heartbeat(key, token, leaseMs));
  }

  resolveApplied(key: string, token: string, result: string): Promise<WriteOutcome> {
    return this.#write(
      "resolve_applied",
      this.#store.resolveApplied(key, token, result),
      "reconcile.applied",
    );
  }

  resolveNotApplied(key: string, token: string): Promise<WriteOutcome> {
    return this.#write(
      "resolve_not_applied",
      this.#store.resolveNotApplied(key, token),
      "reconcile.not_applied",
    );
  }

  giveUp(key: string, token: string, error?: StoredError): Promise<WriteOutcome> {
    return this.#write("give_up", this.#store.giveUp(key, token, error), "reconcile.gave_up");
  }

  resolve(key: string, request: ResolveRequest): Promise<WriteOutcome> {
    return this.#store.resolve(key, request);
  }

  async get(key: string): Promise<OnceRecord | undefined> {
    const record = await this.#store.get(key);
    if (record?.state === "done") await this.#count("get.done");
    return record;
  }

  async #write(name: string, write: Promise<WriteOutcome>, onOk?: string): Promise<WriteOutcome> {
    const answer = await write;
    if (answer.outcome === "lost") await this.#count(`lost.${name}`);
    else if (answer.outcome === "ok" && onOk) await this.#count(onOk);
    return answer;
  }

  async #count(field: string): Promise<void> {
    try {
      await this.#counters.increment(field);
    } catch {
      // Measuring must never change what is measured.
    }
  }
}
