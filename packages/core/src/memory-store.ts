import { randomBytes } from "node:crypto";
import type { StoredError } from "./errors.js";
import {
  type ClaimOutcome,
  type ClaimRequest,
  DEFAULT_RETENTION_MS,
  type OnceRecord,
  type OnceStore,
  type RecordState,
  type ResolveRequest,
  retryAfterFor,
  type StoreOptions,
  type WriteOutcome,
} from "./store.js";

interface Entry {
  record: OnceRecord;
  expiresAt: number;
}

/**
 * The state machine of docs/protocol.md in process memory: the reference the Redis store is tested
 * against, and a store for users' unit tests. Not shared between processes; not durable.
 */
export class MemoryStore implements OnceStore {
  readonly #entries = new Map<string, Entry>();
  readonly retentionMs: number;
  readonly #now: () => number;

  constructor(options: StoreOptions & { now?: () => number } = {}) {
    this.retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    this.#now = options.now ?? Date.now;
  }

  async claim(request: ClaimRequest): Promise<ClaimOutcome> {
    const now = this.#now();
    const record = this.#live(request.key, now);
    if (!record) {
      const fresh: OnceRecord = {
        key: request.key,
        state: "claimed",
        phase: request.phase,
        fence: 0,
        fingerprint: request.fingerprint,
        tool: request.tool,
        claims: 0,
        createdAt: now,
        updatedAt: now,
      };
      return { outcome: "acquired", ...this.#grant(fresh, request, now, "claimed") };
    }
    if (record.fingerprint !== request.fingerprint) return { outcome: "conflict", tool: record.tool };
    const traced = record.trace === undefined ? {} : { trace: record.trace };
    switch (record.state) {
      case "done":
        return { outcome: "replay", result: record.result ?? "null", fence: record.fence, ...traced };
      case "failed":
        return {
          outcome: "replay_error",
          error: record.error ?? { name: "Error", message: "failed" },
          fence: record.fence,
          ...traced,
        };
      case "released":
        return { outcome: "acquired", ...this.#grant(record, request, now, "claimed") };
      case "unknown":
        return { outcome: "reconcile", from: "unknown", ...this.#grant(record, request, now, "reconciling") };
      case "claimed":
      case "reconciling": {
        const leaseUntil = record.leaseUntil ?? 0;
        if (leaseUntil > now) {
          return {
            outcome: "in_flight",
            retryAfterMs: retryAfterFor(leaseUntil - now),
            state: record.state,
            fence: record.fence,
          };
        }
        if (record.state === "claimed" && record.phase === "prepare") {
          return { outcome: "takeover", ...this.#grant(record, request, now, "claimed") };
        }
        const from = record.state;
        return { outcome: "reconcile", from, ...this.#grant(record, request, now, "reconciling") };
      }
    }
  }

  async beginEffect(key: string, token: string): Promise<WriteOutcome> {
    return this.#ownerWrite(key, token, ["claimed"], (r) => {
      r.phase = "effect";
    });
  }

  async complete(key: string, token: string, result: string): Promise<WriteOutcome> {
    return this.#ownerWrite(key, token, ["claimed"], (r) => this.#settle(r, "done", { result }));
  }

  async failTerminal(key: string, token: string, error: StoredError): Promise<WriteOutcome> {
    return this.#ownerWrite(key, token, ["claimed"], (r) => this.#settle(r, "failed", { error }));
  }

  async release(key: string, token: string, options: { notApplied?: boolean } = {}): Promise<WriteOutcome> {
    return this.#ownerWrite(key, token, ["claimed"], (r) => {
      if (r.phase === "effect" && !options.notApplied) {
        return "the effect phase has begun: release needs the assertion that the effect was not applied";
      }
      this.#settle(r, "released", {});
    });
  }

  async markUnknown(key: string, token: string, error?: StoredError): Promise<WriteOutcome> {
    return this.#ownerWrite(key, token, ["claimed"], (r) =>
      this.#settle(r, "unknown", error ? { error } : {}),
    );
  }

  async heartbeat(key: string, token: string, leaseMs: number): Promise<WriteOutcome> {
    return this.#ownerWrite(key, token, ["claimed", "reconciling"], (r, now) => {
      r.leaseUntil = now + leaseMs;
    });
  }

  async resolveApplied(key: string, token: string, result: string): Promise<WriteOutcome> {
    return this.#ownerWrite(key, token, ["reconciling"], (r) => this.#settle(r, "done", { result }));
  }

  async resolveNotApplied(key: string, token: string): Promise<WriteOutcome> {
    return this.#ownerWrite(key, token, ["reconciling"], (r) => {
      r.state = "claimed";
      r.phase = "effect";
    });
  }

  async giveUp(key: string, token: string, error?: StoredError): Promise<WriteOutcome> {
    return this.#ownerWrite(key, token, ["reconciling"], (r) =>
      this.#settle(r, "unknown", error ? { error } : {}),
    );
  }

  async resolve(key: string, request: ResolveRequest): Promise<WriteOutcome> {
    const now = this.#now();
    const record = this.#live(key, now);
    if (!record) return { outcome: "refused", reason: "no record" };
    if (record.state !== "unknown")
      return { outcome: "refused", reason: `state is ${record.state}, not unknown` };
    if (request.expectFence !== undefined && request.expectFence !== record.fence) {
      return { outcome: "refused", reason: `fence is ${record.fence}, expected ${request.expectFence}` };
    }
    const { decision } = request;
    record.fence += 1;
    record.resolution = { as: decision.as, by: request.by, why: request.why, at: now };
    if (decision.as === "applied") this.#settle(record, "done", { result: decision.result });
    else if (decision.as === "failed") this.#settle(record, "failed", { error: decision.error });
    else this.#settle(record, "released", {});
    this.#touch(record, now);
    return { outcome: "ok", fence: record.fence };
  }

  async get(key: string): Promise<OnceRecord | undefined> {
    const now = this.#now();
    const record = this.#live(key, now);
    if (!record) return undefined;
    const entry = this.#entries.get(key);
    return structuredClone({ ...record, ttlMs: (entry?.expiresAt ?? now) - now });
  }

  #live(key: string, now: number): OnceRecord | undefined {
    const entry = this.#entries.get(key);
    if (entry && entry.expiresAt <= now) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry?.record;
  }

  #grant(record: OnceRecord, request: ClaimRequest, now: number, state: "claimed" | "reconciling") {
    record.fence += 1;
    record.claims += 1;
    record.state = state;
    record.phase = state === "claimed" ? request.phase : "effect";
    record.owner = `${record.fence}.${randomBytes(8).toString("hex")}`;
    record.leaseUntil = now + request.leaseMs;
    if (request.trace !== undefined) record.trace = request.trace;
    this.#touch(record, now);
    return { token: record.owner, fence: record.fence, leaseUntil: record.leaseUntil, claims: record.claims };
  }

  #settle(record: OnceRecord, state: RecordState, fields: { result?: string; error?: StoredError }): void {
    record.state = state;
    delete record.owner;
    delete record.leaseUntil;
    delete record.result;
    delete record.error;
    if (fields.result !== undefined) record.result = fields.result;
    if (fields.error !== undefined) record.error = fields.error;
  }

  #touch(record: OnceRecord, now: number): void {
    record.updatedAt = now;
    this.#entries.set(record.key, { record, expiresAt: now + this.retentionMs });
  }

  #ownerWrite(
    key: string,
    token: string,
    states: readonly RecordState[],
    // biome-ignore lint/suspicious/noConfusingVoidType: most transitions return nothing; a refusal returns why.
    apply: (record: OnceRecord, now: number) => string | void,
  ): WriteOutcome {
    const now = this.#now();
    const record = this.#live(key, now);
    if (!record || record.owner !== token) return { outcome: "lost" };
    if (!states.includes(record.state)) {
      return { outcome: "refused", reason: `state is ${record.state}, not ${states.join(" or ")}` };
    }
    const refusal = apply(record, now);
    if (typeof refusal === "string") return { outcome: "refused", reason: refusal };
    this.#touch(record, now);
    return record.leaseUntil === undefined
      ? { outcome: "ok", fence: record.fence }
      : { outcome: "ok", fence: record.fence, leaseUntil: record.leaseUntil };
  }
}
