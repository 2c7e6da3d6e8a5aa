import { randomBytes } from "node:crypto";
import type { LivenessStore } from "@once/core";

/**
 * How long a process's liveness entry lives unrenewed, by default: how soon a dead owner's calls reconcile
 * (about a second after a crash), at four renewals a second while the process holds a claim; also the longest
 * pause an owner survives (a stall of more than half of it, after a look at the entry, is fenced out).
 */
export const DEFAULT_LIVENESS_TTL_MS = 1_000;

/**
 * A claim's hold on its process's liveness entry: the id its claim names, and whether the entry can still be
 * vouched for. Released when the call is settled; `lost` when the entry is gone (a renew found it gone, or no
 * renew was confirmed for a whole `ttlMs`): every claim naming it may have been taken over.
 */
export class LivenessHold {
  readonly #entry: Entry;
  #released = false;

  constructor(entry: Entry) {
    this.#entry = entry;
  }

  get id(): string {
    return this.#entry.id;
  }

  /** True while the entry is not lost and more than half its time is left since it was last confirmed. */
  get fresh(): boolean {
    return !this.#entry.lost && performance.now() - this.#entry.confirmedAt < this.#entry.owner.ttlMs / 2;
  }

  get lost(): boolean {
    return this.#entry.lost;
  }

  /** Renews the entry now: true if it is still alive (and then fresh again). */
  confirm(): Promise<boolean> {
    return this.#entry.owner.renew(this.#entry);
  }

  /** Called once, when the entry is lost. */
  onLost(listener: () => void): void {
    if (this.#entry.lost) listener();
    else this.#entry.listeners.add(listener);
  }

  offLost(listener: () => void): void {
    this.#entry.listeners.delete(listener);
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#entry.owner.release();
  }
}

interface Entry {
  owner: ProcessLiveness;
  id: string;
  /** Monotonic time at or before the store last created or extended the entry (when that request was sent). */
  confirmedAt: number;
  lost: boolean;
  listeners: Set<() => void>;
}

/** One per store per process: see {@link ProcessLiveness.of}. */
const byStore = new WeakMap<LivenessStore, Map<number, ProcessLiveness>>();

/**
 * A process's one liveness entry in one store (docs/protocol.md, "Liveness"): opened before the first claim
 * that names it, renewed every quarter of `ttlMs` by one heartbeat for every claim it holds, left to run out
 * when it holds none. Every judgement of it is on the monotonic clock, counted from when a request was
 * *sent*, like the lease's. An entry found gone is never used again: the next claim opens one under a new id.
 */
export class ProcessLiveness {
  readonly #store: LivenessStore;
  readonly ttlMs: number;
  #entry: Entry | undefined;
  #opening: Promise<Entry> | undefined;
  #holds = 0;
  #timer: NodeJS.Timeout | undefined;

  private constructor(store: LivenessStore, ttlMs: number) {
    this.#store = store;
    this.ttlMs = ttlMs;
  }

  /** The process's liveness in `store` for entries of `ttlMs`: every engine on that store shares it. */
  static of(store: LivenessStore, ttlMs: number): ProcessLiveness {
    let byTtl = byStore.get(store);
    if (byTtl === undefined) {
      byTtl = new Map();
      byStore.set(store, byTtl);
    }
    let liveness = byTtl.get(ttlMs);
    if (liveness === undefined) {
      liveness = new ProcessLiveness(store, ttlMs);
      byTtl.set(ttlMs, liveness);
    }
    return liveness;
  }

  /**
   * A hold on an entry alive now, for a claim to name: the current one if it is fresh (no round trip), renewed
   * if it may be stale, a new one if it is gone. Throws what the store throws: a claim does not go out unless
   * its entry exists, so no claimant can see it gone before it was made.
   */
  async hold(): Promise<LivenessHold> {
    this.#holds += 1;
    try {
      const entry = await this.#usable();
      this.#schedule();
      return new LivenessHold(entry);
    } catch (error) {
      this.release();
      throw error;
    }
  }

  release(): void {
    this.#holds -= 1;
    if (this.#holds === 0) {
      // Nothing to vouch for: the entry runs out by itself, and an idle process costs the store nothing.
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }

  /** Renews `entry`; false (and the entry lost) when the store says it is gone. */
  async renew(entry: Entry): Promise<boolean> {
    if (entry.lost) return false;
    const sentAt = performance.now();
    if (!(await this.#store.renewLiveness(entry.id, this.ttlMs))) {
      this.#lose(entry);
      return false;
    }
    entry.confirmedAt = Math.max(entry.confirmedAt, sentAt);
    return !entry.lost;
  }

  async #usable(): Promise<Entry> {
    const entry = this.#entry;
    if (entry !== undefined && !entry.lost) {
      if (performance.now() - entry.confirmedAt < this.ttlMs / 2) return entry;
      // It may have run out: renewed, or replaced, never trusted on an old confirmation. A renew that finds it
      // proves it never ran out (nothing makes an entry again), so no claimant can have seen it gone.
      if (await this.renew(entry).catch(() => false)) return entry;
      this.#lose(entry);
    }
    this.#opening ??= this.#open().finally(() => {
      this.#opening = undefined;
    });
    return this.#opening;
  }

  async #open(): Promise<Entry> {
    // 16 random hex characters: unique among the processes of a store, and never opened twice.
    const id = randomBytes(8).toString("hex");
    const sentAt = performance.now();
    if (!(await this.#store.openLiveness(id, this.ttlMs)))
      throw new Error(`liveness entry ${id} exists already: a random id was reused`);
    const entry: Entry = { owner: this, id, confirmedAt: sentAt, lost: false, listeners: new Set() };
    this.#entry = entry;
    return entry;
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#holds === 0) return;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        void this.#beat();
      },
      Math.max(1, Math.floor(this.ttlMs / 4)),
    );
  }

  async #beat(): Promise<void> {
    const entry = this.#entry;
    if (entry !== undefined && !entry.lost) {
      try {
        await this.renew(entry);
      } catch {
        // The store unreachable: keep trying until a whole entry's time has gone by unconfirmed.
        if (performance.now() - entry.confirmedAt >= this.ttlMs) this.#lose(entry);
      }
    }
    this.#schedule();
  }

  #lose(entry: Entry): void {
    if (entry.lost) return;
    entry.lost = true;
    if (this.#entry === entry) this.#entry = undefined;
    for (const listener of entry.listeners) listener();
    entry.listeners.clear();
  }
}
