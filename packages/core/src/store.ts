import type { StoredError } from "./errors.js";

/** Where the owner is: `prepare` has not touched the outside world; in `effect` the side effect may have happened. */
export type Phase = "prepare" | "effect";

/** Every state of a record, in the order of a record's life; see docs/protocol.md for the transitions. */
export const RECORD_STATES = [
  "claimed",
  "reconciling",
  "released",
  "done",
  "failed",
  "unknown",
  "awaiting_approval",
  "approved",
  "cancelled",
] as const;

/** The state of a record. */
export type RecordState = (typeof RECORD_STATES)[number];

/** What an operator decided about an `unknown` record, kept on the record. */
export interface Resolution {
  as: "applied" | "not_applied" | "failed";
  by: string;
  why: string;
  at: number;
}

/**
 * A person's answer to an approval request, kept on the record: `approved` or `denied` by someone, or
 * `expired` when no decision came before the request's expiry (noticed by the first claim after it).
 */
export type ApprovalDecision =
  | { as: "approved" | "denied"; by: string; why: string; at: number }
  | { as: "expired"; at: number };

/** The approval request of a record whose tool's policy asked for one; see docs/approvals.md. */
export interface ApprovalRequest {
  /** What the tool's policy said: why a person must say yes. */
  reason: string;
  requestedAt: number;
  /** Without a decision by then, the call fails for good (`approval_expired`). */
  expiresAt: number;
  decision?: ApprovalDecision;
}

/** Which task and step a call belongs to: identifiers, not payload (kept on the record unless a store is told not to). */
export interface TaskIdentity {
  namespace: string;
  taskId: string;
  stepId: string;
}

/** Who stopped a task, when (ms, the store's clock) and why; kept once per task, see docs/cancellation.md. */
export interface Cancellation {
  by: string;
  why: string;
  at: number;
}

/** A record as read back from a store. Times are milliseconds on the store's clock. */
export interface OnceRecord {
  key: string;
  state: RecordState;
  phase: Phase;
  fence: number;
  owner?: string;
  leaseUntil?: number;
  fingerprint: string;
  tool: string;
  claims: number;
  createdAt: number;
  updatedAt: number;
  /** JSON text of the result (state `done`). */
  result?: string;
  /** The stored failure (state `failed`), or why the outcome is unknown (state `unknown`). */
  error?: StoredError;
  /** W3C traceparent of the attempt that executed (or is executing). */
  trace?: string;
  resolution?: Resolution;
  /** The approval request, for a call whose tool's policy asked for one. */
  approval?: ApprovalRequest;
  /** The task and step the call belongs to, when the claim named them and the store keeps identities. */
  task?: TaskIdentity;
  /**
   * The task's cancellation: on a `cancelled` record, why it never ran; on a record whose effect was running
   * when the task was cancelled (claimed in the effect phase, reconciling, unknown), that its owner was told.
   */
  cancellation?: Cancellation;
  /** Milliseconds until the record expires, when the store knows it. */
  ttlMs?: number;
  /**
   * The liveness entry of the owner's process, when its claim named one ({@link LivenessStore}): while the
   * record is `claimed` or `reconciling`, the entry gone means the owner is gone, and the next claim does not
   * wait out the lease.
   */
  liveness?: string;
}

export interface ClaimRequest {
  key: string;
  fingerprint: string;
  tool: string;
  /** The phase a fresh owner starts in: `prepare` when the tool has a prepare step, else `effect`. */
  phase: Phase;
  leaseMs: number;
  /** W3C traceparent of this attempt, stored if it becomes the owner. */
  trace?: string;
  /**
   * The task and step of the call. Given to a {@link TaskStore}, the claim is refused (`cancelled`) once the
   * task is cancelled — atomically: no effect of a cancelled task starts — and the key is filed under its
   * task, so a cancel reaches it and an operator finds it.
   */
  task?: TaskIdentity;
  /**
   * The liveness entry of the claimant's process ({@link LivenessStore.openLiveness}, opened before this claim
   * is sent), kept on the record if the claim grants ownership. Without it the claim is as before: only its
   * lease says the owner is alive.
   */
  liveness?: string;
}

/** What an owner holds after a claim: pass `token` to every write. */
export interface Ownership {
  token: string;
  fence: number;
  leaseUntil: number;
  claims: number;
  /**
   * True when the record holds a person's approval: the owner runs the effect without asking again (the
   * approval was given for this call, and is used by the owner that runs it).
   */
  approved?: true;
}

/** The answer to a claim. Exactly one of these; see the worker flow in docs/protocol.md. */
export type ClaimOutcome =
  | ({ outcome: "acquired" } & Ownership)
  | ({ outcome: "takeover" } & Ownership)
  | ({ outcome: "reconcile"; from: "claimed" | "reconciling" | "unknown" } & Ownership)
  | { outcome: "replay"; result: string; trace?: string; fence: number }
  | { outcome: "replay_error"; error: StoredError; trace?: string; fence: number }
  | { outcome: "in_flight"; retryAfterMs: number; state: "claimed" | "reconciling"; fence: number }
  | { outcome: "conflict"; tool: string }
  | {
      outcome: "awaiting_approval";
      reason: string;
      requestedAt: number;
      expiresAt: number;
      fence: number;
    }
  | { outcome: "cancelled"; cancellation: Cancellation; fence: number };

/** The answer to an owner's write. `lost`: the token is not the owner's; the record is unchanged. */
export type WriteOutcome =
  /** `cancelRequested` (heartbeat): the task was cancelled while this owner's effect ran; abort it. */
  | { outcome: "ok"; fence: number; leaseUntil?: number; cancelRequested?: true }
  | { outcome: "lost" }
  | { outcome: "refused"; reason: string };

/** An operator's decision about an `unknown` record. */
export type ResolveDecision =
  | { as: "applied"; result: string }
  | { as: "not_applied" }
  | { as: "failed"; error: StoredError };

export interface ResolveRequest {
  decision: ResolveDecision;
  /** Who decided: a person or a system. */
  by: string;
  why: string;
  /** The fence the operator saw; refused if the record moved on since. */
  expectFence?: number;
}

/** What an owner asks for when the tool's policy wants a person's yes first. */
export interface ApprovalAsk {
  reason: string;
  /** How long the request waits for a decision, from now on the store's clock. */
  ttlMs: number;
}

/** The answer to `requestApproval`: `ok` when this owner's write created the request. */
export type ApprovalRequestOutcome =
  | { outcome: "ok"; fence: number; requestedAt: number; expiresAt: number }
  | { outcome: "lost" }
  | { outcome: "refused"; reason: string };

/** A person's decision about an `awaiting_approval` record, bound to what they saw. */
export interface DecisionRequest {
  decision: "approved" | "denied";
  /** Who decided: a person or a system. Required, non-empty. */
  by: string;
  why: string;
  /** The fence of the record the person saw: refused if it moved on since. */
  expectFence: number;
  /** The fingerprint of the call the person saw: a decision about input A never applies to input B. */
  fingerprint: string;
}

/**
 * The dedup store: one method per transition, plain data in and out. Every owner write compares
 * the full owner token; every transition refreshes the record's retention.
 */
export interface OnceStore {
  /** How long a record outlives its last transition. */
  readonly retentionMs: number;
  claim(request: ClaimRequest): Promise<ClaimOutcome>;
  /** claimed(prepare) → claimed(effect). */
  beginEffect(key: string, token: string): Promise<WriteOutcome>;
  /** claimed → done with `result` (JSON text). */
  complete(key: string, token: string, result: string): Promise<WriteOutcome>;
  /** claimed → failed: the stored error is replayed to every later attempt. */
  failTerminal(key: string, token: string, error: StoredError): Promise<WriteOutcome>;
  /** claimed → released. Refused in the effect phase unless `notApplied` asserts nothing happened. */
  release(key: string, token: string, options?: { notApplied?: boolean }): Promise<WriteOutcome>;
  /** claimed → unknown: the effect may have happened. */
  markUnknown(key: string, token: string, error?: StoredError): Promise<WriteOutcome>;
  /** Extends the lease of a claimed or reconciling owner. */
  heartbeat(key: string, token: string, leaseMs: number): Promise<WriteOutcome>;
  /** reconciling → done: the effect had happened; `result` is what it produced. */
  resolveApplied(key: string, token: string, result: string): Promise<WriteOutcome>;
  /** reconciling → claimed(effect), same token: the effect had not happened, go ahead. */
  resolveNotApplied(key: string, token: string): Promise<WriteOutcome>;
  /** reconciling → unknown: nothing could tell whether the effect happened. */
  giveUp(key: string, token: string, error?: StoredError): Promise<WriteOutcome>;
  /** unknown → done | released | failed, by an operator; fence + 1, who/when/why kept. */
  resolve(key: string, request: ResolveRequest): Promise<WriteOutcome>;
  /** The record, or undefined if there is none. */
  get(key: string): Promise<OnceRecord | undefined>;
}

/**
 * A store that keeps approval requests: the transitions of docs/approvals.md on top of {@link OnceStore}. A
 * tool with an approval policy runs only on one; an entry point refuses it at start on another.
 */
export interface ApprovalStore extends OnceStore {
  /**
   * claimed → awaiting_approval, by the owner: the call waits for a person; owner and lease are given up.
   * Refused when the record has had an approval request before: a call is asked about once.
   */
  requestApproval(key: string, token: string, ask: ApprovalAsk): Promise<ApprovalRequestOutcome>;
  /**
   * awaiting_approval → approved | failed (`denied`), by a person; fence + 1, who/when/why kept. Refused, the
   * record unchanged, unless the record awaits approval, its request has not expired, and its fence and
   * fingerprint are the ones given.
   */
  decide(key: string, request: DecisionRequest): Promise<WriteOutcome>;
}

/**
 * A store that keeps one liveness entry per process (docs/protocol.md, "Liveness"): a process that owns
 * claims opens an entry under an id of its own, names it on every claim, and renews it with one heartbeat for
 * all of them. While a record is `claimed` or `reconciling` and the entry its owner named is gone (expired or
 * ended), a claim treats that owner's lease as run out: takeover or reconcile at once, fence + 1. Fencing,
 * leases and their heartbeats are unchanged; an entry only ever shortens how long a dead owner is waited for.
 *
 * An entry is made once: its process opens it under a fresh random id before its first claim names it and
 * never opens that id again, and `renewLiveness` only extends an entry that exists. So an entry once gone
 * stays gone, and a claimant that saw it gone saw the truth.
 */
export interface LivenessStore extends OnceStore {
  /** Creates the entry `id`, alive for `ttlMs` from now on the store's clock; false if `id` is alive already. */
  openLiveness(id: string, ttlMs: number): Promise<boolean>;
  /** Extends the entry `id` to `ttlMs` from now; false, and nothing made, when it is gone. */
  renewLiveness(id: string, ttlMs: number): Promise<boolean>;
  /** Ends the entry `id`: claims that name it no longer wait for their lease. */
  endLiveness(id: string): Promise<void>;
}

/** True when `store` keeps liveness entries. */
export function isLivenessStore(store: OnceStore): store is LivenessStore {
  return (
    typeof (store as Partial<LivenessStore>).openLiveness === "function" &&
    typeof (store as Partial<LivenessStore>).renewLiveness === "function" &&
    typeof (store as Partial<LivenessStore>).endLiveness === "function"
  );
}

/** The shortest liveness entry a store takes, ms: below it a heartbeat could not keep up across a network. */
export const MIN_LIVENESS_TTL_MS = 200;

/** True when `store` keeps approval requests. */
export function isApprovalStore(store: OnceStore): store is ApprovalStore {
  return (
    typeof (store as Partial<ApprovalStore>).requestApproval === "function" &&
    typeof (store as Partial<ApprovalStore>).decide === "function"
  );
}

/** Which task: a task id in a namespace (default `"default"`), as in {@link StepIdentity}. */
export interface TaskRef {
  namespace?: string;
  taskId: string;
}

/** Who cancels a task and why. `by` is required, non-empty. */
export interface CancelRequest {
  by: string;
  why: string;
}

/** What a cancel came to. `already_cancelled`: an earlier cancel stands (its who/why/when), nothing changed. */
export interface CancelOutcome {
  outcome: "cancelled" | "already_cancelled";
  cancellation: Cancellation;
  /** Keys of the task's calls that had not started their effect: now `cancelled`, replayed to every caller. */
  stopped: string[];
  /** Keys whose effect was running: their owners see `ctx.signal` abort at their next heartbeat. */
  running: string[];
}

/** A task as its store keeps it: the cancellation, if any, and every call filed under it. */
export interface TaskRecords {
  namespace: string;
  taskId: string;
  cancellation?: Cancellation;
  /** Every call claimed with this task, in the order of their first claim. */
  records: OnceRecord[];
}

/**
 * A store that knows tasks: claims that name their task are filed under it, and a task can be cancelled. After
 * `cancelTask` returns, no claim of the task is granted (`cancelled`), on every topology the store supports;
 * a cancelled task stays cancelled for the store's retention, refreshed by every refused claim.
 */
export interface TaskStore extends OnceStore {
  cancelTask(task: TaskRef, request: CancelRequest): Promise<CancelOutcome>;
  readTask(task: TaskRef): Promise<TaskRecords>;
}

/** True when `store` knows tasks (cancellation, a task's records). */
export function isTaskStore(store: OnceStore): store is TaskStore {
  return (
    typeof (store as Partial<TaskStore>).cancelTask === "function" &&
    typeof (store as Partial<TaskStore>).readTask === "function"
  );
}

/** Settings every store shares. */
export interface StoreOptions {
  /** How long a record outlives its last transition. Default 24 h. */
  retentionMs?: number;
  /**
   * Keep each record's namespace, task id and step id (identifiers, never payload), so operators can see what
   * a task did. Default true; false keeps only the key (a task's calls are still found, by key, and cancelled).
   */
  keepTaskIdentity?: boolean;
}

export const DEFAULT_RETENTION_MS = 24 * 60 * 60 * 1000;

/** How long an `in_flight` caller should wait: the owner's remaining lease, between 50 ms and 5 s. */
export function retryAfterFor(leaseRemainingMs: number): number {
  return Math.min(Math.max(leaseRemainingMs, 50), 5_000);
}

/**
 * A store whose records live in a database that effects can write to. A tool declared `transactional` gets a
 * transaction of that database as `ctx.transaction`, and its record's `complete` commits in the same
 * transaction: the effect and the record are one commit, or neither happened.
 */
export interface TransactionalStore<Transaction = unknown> extends OnceStore {
  /** The database the records are in: what a tool's `transactional.database`, if it names one, must be. */
  readonly database: string;
  /**
   * Opens a transaction, runs `work` in it, then `complete(key, token, <what work returned>)` in the same
   * transaction, and commits only when that write is `ok`; otherwise rolls back and returns the write's
   * outcome. A throw from `work` rolls back and is rethrown. A crash anywhere rolls back too: nothing `work`
   * wrote survives unless the record is `done`. `leaseMs` bounds how long the transaction may sit idle (a
   * frozen owner's transaction is ended by the database, and its locks with it).
   */
  completeInTransaction(
    key: string,
    token: string,
    work: (transaction: Transaction) => Promise<string>,
    options: { leaseMs: number },
  ): Promise<WriteOutcome>;
}

/** True when `store` can commit an effect and its record in one transaction. */
export function isTransactionalStore(store: OnceStore): store is TransactionalStore {
  return (
    typeof (store as Partial<TransactionalStore>).completeInTransaction === "function" &&
    typeof (store as Partial<TransactionalStore>).database === "string"
  );
}
