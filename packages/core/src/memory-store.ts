import { APPROVAL_EXPIRED_ERROR, deniedError } from "./approval.js";
import { cancellableTaskKey } from "./cancel-request.js";
import type { StoredError } from "./errors.js";
import { DEFAULT_NAMESPACE, deriveTaskKey } from "./key.js";
import { ownerToken } from "./owner-token.js";
import { livenessTtl, positiveInteger } from "./positive-integer.js";

import {
  type ApprovalAsk,
  type ApprovalRequestOutcome,
  type ApprovalStore,
  type Cancellation,
  type CancelOutcome,
  type CancelRequest,
  type ClaimOutcome,
  type ClaimRequest,
  DEFAULT_RETENTION_MS,
  type DecisionRequest,
  type LivenessStore,
  type OnceRecord,
  type RecordState,
  type ResolveRequest,
  retryAfterFor,
  type StoreOptions,
  type TaskRecords,
  type TaskRef,
  type TaskStore,
  type WriteOutcome,
} from "./store.js";

interface Entry {
  record: OnceRecord;
  expiresAt: number;
}

/** A task as the store keeps it: its cancellation, if any, and the keys filed under it in filing order. */
interface TaskEntry {
  cancellation?: Cancellation;
  filed: Set<string>;
  expiresAt: number;
}

// The states in which the effect has not begun: a cancel stops them. (No record at all is one too.)
const UNSTARTED: readonly RecordState[] = ["released", "awaiting_approval", "approved"];

/**
 * The state machine of docs/protocol.md in process memory: the reference the Redis store is tested
 * against, and a store for users' unit tests. Not shared between processes; not durable. Its records carry
 * no layout: they never outlive the process, so no build but the one that wrote them ever reads them.
 */
export class MemoryStore implements ApprovalStore, TaskStore, LivenessStore {
  readonly #entries = new Map<string, Entry>();
  /** Liveness entries: id → when it expires (ms). Only an open adds one; a renew never brings one back. */
  readonly #liveness = new Map<string, number>();
  readonly #tasks = new Map<string, TaskEntry>();
  readonly retentionMs: number;
  readonly #keepTaskIdentity: boolean;
  readonly #now: () => number;

  constructor(options: StoreOptions & { now?: () => number } = {}) {
    this.retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    positiveInteger("retentionMs", this.retentionMs);
    this.#keepTaskIdentity = options.keepTaskIdentity ?? true;
    this.#now = options.now ?? Date.now;
  }

  async claim(request: ClaimRequest): Promise<ClaimOutcome> {
    positiveInteger("leaseMs", request.leaseMs);
    const taskKey = request.task === undefined ? undefined : deriveTaskKey(request.task);
    const now = this.#now();
    const record = this.#live(request.key, now);
    if (taskKey !== undefined) {
      // The task is checked and the key filed in the same step as the claim: a claim is wholly before a
      // cancel (and the cancel reaches it) or wholly after it (and is refused).
      const task = this.#liveTask(taskKey, now) ?? { filed: new Set<string>(), expiresAt: 0 };
      task.expiresAt = now + this.retentionMs;
      this.#tasks.set(taskKey, task);
      if (task.cancellation !== undefined) {
        return { outcome: "cancelled", cancellation: { ...task.cancellation }, fence: record?.fence ?? 0 };
      }
      task.filed.add(request.key);
    }
    if (record?.state === "cancelled") {
      // Before the fingerprint: a cancel's tombstone knows no call, and answers every one alike.
      const cancellation = record.cancellation as Cancellation;
      return { outcome: "cancelled", cancellation: { ...cancellation }, fence: record.fence };
    }
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
        ...(request.task !== undefined && this.#keepTaskIdentity ? { task: identityOf(request.task) } : {}),
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
      case "approved":
        return { outcome: "acquired", ...this.#grant(record, request, now, "claimed") };
      case "awaiting_approval": {
        const approval = record.approval as NonNullable<OnceRecord["approval"]>;
        if (approval.expiresAt > now) {
          const { reason, requestedAt, expiresAt } = approval;
          return { outcome: "awaiting_approval", reason, requestedAt, expiresAt, fence: record.fence };
        }
        // Nobody decided in time: the call fails for good, and every later attempt replays that.
        approval.decision = { as: "expired", at: now };
        this.#settle(record, "failed", { error: { ...APPROVAL_EXPIRED_ERROR } });
        this.#touch(record, now);
        return {
          outcome: "replay_error",
          error: { ...APPROVAL_EXPIRED_ERROR },
          fence: record.fence,
          ...traced,
        };
      }
      case "unknown":
        return { outcome: "reconcile", from: "unknown", ...this.#grant(record, request, now, "reconciling") };
      case "claimed":
      case "reconciling": {
        const leaseUntil = record.leaseUntil ?? 0;
        // An owner whose process's liveness entry is gone is gone: its lease is not waited out.
        const ownerGone = record.liveness !== undefined && !this.#alive(record.liveness, now);
        if (leaseUntil > now && !ownerGone) {
          // Come back when the lease would run out, or the owner's liveness entry, if that is sooner.
          const until = Math.min(leaseUntil, this.#liveness.get(record.liveness ?? "") ?? leaseUntil);
          return {
            outcome: "in_flight",
            retryAfterMs: retryAfterFor(until - now),
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

  async openLiveness(id: string, ttlMs: number): Promise<boolean> {
    livenessTtl(ttlMs);
    const now = this.#now();
    if (this.#alive(id, now)) return false;
    this.#liveness.set(id, now + ttlMs);
    return true;
  }

  async renewLiveness(id: string, ttlMs: number): Promise<boolean> {
    livenessTtl(ttlMs);
    const now = this.#now();
    if (!this.#alive(id, now)) return false;
    this.#liveness.set(id, now + ttlMs);
    return true;
  }

  async endLiveness(id: string): Promise<void> {
    this.#liveness.delete(id);
  }

  #alive(id: string, now: number): boolean {
    const expiresAt = this.#liveness.get(id);
    if (expiresAt === undefined) return false;
    if (expiresAt > now) return true;
    this.#liveness.delete(id);
    return false;
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
    positiveInteger("leaseMs", leaseMs);
    const outcome = this.#ownerWrite(key, token, ["claimed", "reconciling"], (r, now) => {
      r.leaseUntil = now + leaseMs;
    });
    // The task was cancelled while this owner's effect ran: it is told here, at its next heartbeat.
    if (outcome.outcome === "ok" && this.#live(key, this.#now())?.cancellation !== undefined)
      return { ...outcome, cancelRequested: true };
    return outcome;
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

  async requestApproval(key: string, token: string, ask: ApprovalAsk): Promise<ApprovalRequestOutcome> {
    positiveInteger("ttlMs", ask.ttlMs);
    let requested: { requestedAt: number; expiresAt: number } | undefined;
    const outcome = this.#ownerWrite(key, token, ["claimed"], (r, now) => {
      if (r.approval !== undefined) return "an approval was requested for this record before";
      requested = { requestedAt: now, expiresAt: now + ask.ttlMs };
      r.approval = { reason: ask.reason, ...requested };
      this.#settle(r, "awaiting_approval", {});
    });
    if (outcome.outcome !== "ok" || requested === undefined) return outcome as ApprovalRequestOutcome;
    return { outcome: "ok", fence: outcome.fence, ...requested };
  }

  async decide(key: string, request: DecisionRequest): Promise<WriteOutcome> {
    const now = this.#now();
    const record = this.#live(key, now);
    if (!record) return { outcome: "refused", reason: "no record" };
    if (record.state !== "awaiting_approval" || record.approval === undefined)
      return { outcome: "refused", reason: `state is ${record.state}, not awaiting_approval` };
    if (record.approval.expiresAt <= now)
      return { outcome: "refused", reason: "the approval request expired" };
    if (request.expectFence !== record.fence)
      return { outcome: "refused", reason: `fence is ${record.fence}, expected ${request.expectFence}` };
    if (request.fingerprint !== record.fingerprint)
      return { outcome: "refused", reason: "the fingerprint is another call's" };
    record.fence += 1;
    record.approval.decision = { as: request.decision, by: request.by, why: request.why, at: now };
    if (request.decision === "approved") this.#settle(record, "approved", {});
    else this.#settle(record, "failed", { error: deniedError(request.by, request.why) });
    this.#touch(record, now);
    return { outcome: "ok", fence: record.fence };
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

  async cancelTask(task: TaskRef, request: CancelRequest): Promise<CancelOutcome> {
    const taskKey = cancellableTaskKey(task, request);
    const now = this.#now();
    const entry = this.#liveTask(taskKey, now) ?? { filed: new Set<string>(), expiresAt: 0 };
    if (entry.cancellation !== undefined) {
      return {
        outcome: "already_cancelled",
        cancellation: { ...entry.cancellation },
        stopped: [],
        running: [],
      };
    }
    const cancellation: Cancellation = { by: request.by, why: request.why, at: now };
    entry.cancellation = cancellation;
    entry.expiresAt = now + this.retentionMs;
    this.#tasks.set(taskKey, entry);
    const stopped: string[] = [];
    const running: string[] = [];
    for (const key of entry.filed) {
      const record = this.#live(key, now);
      if (record === undefined) {
        // Filed but never claimed (or expired): a tombstone, so a claim that names no task is refused too.
        this.#touch(tombstone(key, cancellation, now), now);
        stopped.push(key);
      } else if (
        UNSTARTED.includes(record.state) ||
        (record.state === "claimed" && record.phase === "prepare")
      ) {
        record.fence += 1;
        record.cancellation = { ...cancellation };
        this.#settle(record, "cancelled", {});
        this.#touch(record, now);
        stopped.push(key);
      } else if (record.state === "claimed" || record.state === "reconciling" || record.state === "unknown") {
        record.cancellation = { ...cancellation };
        this.#touch(record, now);
        running.push(key);
      }
    }
    return { outcome: "cancelled", cancellation: { ...cancellation }, stopped, running };
  }

  async readTask(task: TaskRef): Promise<TaskRecords> {
    const taskKey = deriveTaskKey(task);
    const now = this.#now();
    const entry = this.#liveTask(taskKey, now);
    const records: OnceRecord[] = [];
    for (const key of entry?.filed ?? []) {
      const record = await this.get(key);
      if (record !== undefined) records.push(record);
    }
    return {
      namespace: task.namespace ?? DEFAULT_NAMESPACE,
      taskId: task.taskId,
      ...(entry?.cancellation === undefined ? {} : { cancellation: { ...entry.cancellation } }),
      records,
    };
  }

  #liveTask(taskKey: string, now: number): TaskEntry | undefined {
    const entry = this.#tasks.get(taskKey);
    if (entry && entry.expiresAt <= now) {
      this.#tasks.delete(taskKey);
      return undefined;
    }
    return entry;
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
    record.owner = ownerToken(record.fence);
    record.leaseUntil = now + request.leaseMs;
    if (request.liveness !== undefined) record.liveness = request.liveness;
    else delete record.liveness;
    if (request.trace !== undefined) record.trace = request.trace;
    this.#touch(record, now);
    const granted = {
      token: record.owner,
      fence: record.fence,
      leaseUntil: record.leaseUntil,
      claims: record.claims,
    };
    return record.approval?.decision?.as === "approved" ? { ...granted, approved: true as const } : granted;
  }

  #settle(record: OnceRecord, state: RecordState, fields: { result?: string; error?: StoredError }): void {
    record.state = state;
    delete record.owner;
    delete record.leaseUntil;
    delete record.liveness;
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

function identityOf(task: NonNullable<ClaimRequest["task"]>): NonNullable<OnceRecord["task"]> {
  return { namespace: task.namespace, taskId: task.taskId, stepId: task.stepId };
}

/** The record a cancel leaves for a filed key that has none: cancelled, fence 1, no call known. */
function tombstone(key: string, cancellation: Cancellation, now: number): OnceRecord {
  return {
    key,
    state: "cancelled",
    phase: "prepare",
    fence: 1,
    fingerprint: "",
    tool: "",
    claims: 0,
    createdAt: now,
    updatedAt: now,
    cancellation: { ...cancellation },
  };
}
