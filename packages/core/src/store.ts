import type { StoredError } from "./errors.js";

/** Where the owner is: `prepare` has not touched the outside world; in `effect` the side effect may have happened. */
export type Phase = "prepare" | "effect";

/** Every state of a record, in the order of a record's life; see docs/protocol.md for the transitions. */
export const RECORD_STATES = ["claimed", "reconciling", "released", "done", "failed", "unknown"] as const;

/** The state of a record. */
export type RecordState = (typeof RECORD_STATES)[number];

/** What an operator decided about an `unknown` record, kept on the record. */
export interface Resolution {
  as: "applied" | "not_applied" | "failed";
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
  /** Milliseconds until the record expires, when the store knows it. */
  ttlMs?: number;
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
}

/** What an owner holds after a claim: pass `token` to every write. */
export interface Ownership {
  token: string;
  fence: number;
  leaseUntil: number;
  claims: number;
}

/** The answer to a claim. Exactly one of these; see the worker flow in docs/protocol.md. */
export type ClaimOutcome =
  | ({ outcome: "acquired" } & Ownership)
  | ({ outcome: "takeover" } & Ownership)
  | ({ outcome: "reconcile"; from: "claimed" | "reconciling" | "unknown" } & Ownership)
  | { outcome: "replay"; result: string; trace?: string; fence: number }
  | { outcome: "replay_error"; error: StoredError; trace?: string; fence: number }
  | { outcome: "in_flight"; retryAfterMs: number; state: "claimed" | "reconciling"; fence: number }
  | { outcome: "conflict"; tool: string };

/** The answer to an owner's write. `lost`: the token is not the owner's; the record is unchanged. */
export type WriteOutcome =
  | { outcome: "ok"; fence: number; leaseUntil?: number }
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

/** Settings every store shares. */
export interface StoreOptions {
  /** How long a record outlives its last transition. Default 24 h. */
  retentionMs?: number;
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
