import { DecisionRefusedError } from "./errors.js";
import {
  type ApprovalStore,
  type CancelOutcome,
  type CancelRequest,
  DEFAULT_RETENTION_MS,
  type OnceRecord,
  type OnceStore,
  type RecordState,
  type ResolveRequest,
  type TaskRecords,
  type TaskRef,
} from "./store.js";

// What an operator's tools (the `once` command, the console) need from a store beyond the transitions of
// OnceStore: read records by filter with a cursor, count them, resolve an unknown one. A store implements
// it next to its OnceStore (`RedisOperatorStore` in @once/redis).

/** Which records to show. Every part given must match; an empty or missing list matches all. */
export interface RecordFilter {
  states?: readonly RecordState[];
  tools?: readonly string[];
  /** Only records whose last transition is at least this old, by the store's clock. */
  olderThanMs?: number;
}

export interface ListRequest extends RecordFilter {
  /** Where the previous page stopped (its `cursor`); leave it out for the first page. */
  cursor?: string;
  /** A page ends once it holds this many matches (it may hold a few more, from the same batch). */
  limit: number;
  /**
   * A page also ends after looking at about this many records, matching or not, so that a rare filter on a
   * large store answers in bounded time (with fewer matches and a cursor). Default: no bound.
   */
  maxExamined?: number;
}

/** One page of matching records, in the order the store found them. */
export interface RecordPage {
  records: OnceRecord[];
  /** Pass it back for the next page; undefined once every record has been looked at. */
  cursor?: string;
  /** Records looked at for this page, matching or not. */
  examined: number;
  /** Keys where records live that are not once records (or could not be read): skipped. */
  skipped: number;
  /** The store's clock, ms, when the page was read. */
  now: number;
}

/** Records by state; every state present, 0 when none. */
export type StateCounts = Record<RecordState, number>;

/** How many records are in each state and of each tool. */
export interface RecordCounts {
  /** Records counted. */
  records: number;
  /** True when counting stopped at the sample size: the counts are of a sample. */
  sampled: boolean;
  /** Keys that are not once records (skipped). */
  skipped: number;
  byState: StateCounts;
  /** By tool name, each with its counts by state. */
  byTool: Record<string, StateCounts>;
  /** Claimed or reconciling records whose owner's lease ran out. */
  expiredLeases: number;
  /** `updatedAt` of the oldest unknown record counted. */
  oldestUnknownAt?: number;
  /** Every key in the store's database (not only once's), when the store can tell cheaply. */
  totalKeys?: number;
  /** The store's clock, ms. */
  now: number;
}

/** What an operator's resolution came to. `refused`: nothing changed, and `reason` says why. */
export type ResolveResult =
  | { outcome: "resolved"; fence: number; record: OnceRecord | undefined }
  | { outcome: "refused"; reason: string; record: OnceRecord | undefined };

export interface OperatorResolveRequest extends ResolveRequest {
  /** The retention the resolved record gets. Default: the one it was written with (see {@link retentionOf}). */
  retentionMs?: number;
}

/** A person's approve or deny, through an operator store. */
export interface OperatorDecisionRequest {
  /** Who decides: required, non-empty; kept on the record. */
  by: string;
  /** Why; kept on the record. Default "". */
  why?: string;
  /** The fence of the record the person saw. Default: the record's, read just before the write. */
  expectFence?: number;
  /**
   * The fingerprint of the call the person saw (what `once inspect` and the console show). Default: the
   * record's, read just before the write; the write is bound to it either way.
   */
  fingerprint?: string;
  /** The retention the decided record gets. Default: the one it was written with (see {@link retentionOf}). */
  retentionMs?: number;
}

/** What a decision came to: the new fence and the record after it. Refusals throw DecisionRefusedError. */
export interface DecisionResult {
  fence: number;
  record: OnceRecord | undefined;
}

/** A store as an operator sees it: records to find, count, read, resolve, approve and deny. */
export interface OperatorStore {
  /** Where the records are, for people to read: never a password. */
  readonly label: string;
  /** The store's clock, ms: the clock records are written with. */
  now(): Promise<number>;
  get(key: string): Promise<OnceRecord | undefined>;
  /** A page of records matching the filter; never blocks the store for a full scan. */
  list(request: ListRequest): Promise<RecordPage>;
  /** Counts by state and tool, of every record or of the first `sample` (default 10,000). */
  count(options?: { sample?: number }): Promise<RecordCounts>;
  /**
   * unknown → done | released | failed, fenced: refused unless the record is `unknown` and, with
   * `expectFence`, still at that fence. Who, why and when are kept on the record.
   */
  resolve(key: string, request: OperatorResolveRequest): Promise<ResolveResult>;
  /**
   * awaiting_approval → approved, fenced and bound to the call's fingerprint: the next claim runs the effect
   * once. Throws DecisionRefusedError, the record unchanged, for a record that does not await approval (none,
   * already decided, expired), another fence or fingerprint than given, or no `by`.
   */
  approve(key: string, request: OperatorDecisionRequest): Promise<DecisionResult>;
  /** awaiting_approval → failed (`denied`), replayed to every retry; refused as {@link OperatorStore.approve} is. */
  deny(key: string, request: OperatorDecisionRequest): Promise<DecisionResult>;
  /**
   * Cancels a task, once (see docs/cancellation.md): after it returns no effect of the task starts. Throws
   * CancelRefusedError, nothing changed, without `by` or for a task id that is not a valid key part.
   */
  cancel(task: TaskRef, request: CancelRequest): Promise<CancelOutcome>;
  /** A task's cancellation and every call filed under it, in the order of their first claim. */
  task(task: TaskRef): Promise<TaskRecords>;
}

/** True when `record` matches every part of `filter` at `now` (the store's clock). */
export function matchesFilter(record: OnceRecord, filter: RecordFilter, now: number): boolean {
  const { states, tools, olderThanMs } = filter;
  return (
    (states === undefined || states.length === 0 || states.includes(record.state)) &&
    (tools === undefined || tools.length === 0 || tools.includes(record.tool)) &&
    (olderThanMs === undefined || now - record.updatedAt >= olderThanMs)
  );
}

export function emptyStateCounts(): StateCounts {
  return {
    claimed: 0,
    reconciling: 0,
    released: 0,
    done: 0,
    failed: 0,
    unknown: 0,
    awaiting_approval: 0,
    approved: 0,
    cancelled: 0,
  };
}

/** Counts records one by one, the way a store that reads them all (a scan) builds its RecordCounts. */
export class RecordTally {
  readonly #now: number;
  readonly #byState = emptyStateCounts();
  readonly #byTool = new Map<string, StateCounts>();
  #records = 0;
  #expiredLeases = 0;
  #oldestUnknownAt: number | undefined;

  constructor(now: number) {
    this.#now = now;
  }

  get records(): number {
    return this.#records;
  }

  add(record: OnceRecord): void {
    this.#records++;
    this.#byState[record.state]++;
    const counts = this.#byTool.get(record.tool) ?? emptyStateCounts();
    counts[record.state]++;
    this.#byTool.set(record.tool, counts);
    const owned = record.state === "claimed" || record.state === "reconciling";
    if (owned && record.leaseUntil !== undefined && record.leaseUntil <= this.#now) this.#expiredLeases++;
    if (record.state === "unknown")
      this.#oldestUnknownAt = Math.min(this.#oldestUnknownAt ?? record.updatedAt, record.updatedAt);
  }

  counts(extra: { sampled: boolean; skipped: number; totalKeys?: number }): RecordCounts {
    const tools = [...this.#byTool.entries()].sort(([a], [b]) => a.localeCompare(b));
    return {
      records: this.#records,
      sampled: extra.sampled,
      skipped: extra.skipped,
      byState: { ...this.#byState },
      byTool: Object.fromEntries(tools),
      expiredLeases: this.#expiredLeases,
      ...(this.#oldestUnknownAt === undefined ? {} : { oldestUnknownAt: this.#oldestUnknownAt }),
      ...(extra.totalKeys === undefined ? {} : { totalKeys: extra.totalKeys }),
      now: this.#now,
    };
  }
}

/**
 * The retention a record was written with: every transition sets its time to live to the retention, so
 * the time left plus the time since the last transition gives it back. Resolving with a default instead
 * could shorten a record's life below the retry window it was written for.
 */
export function retentionOf(record: OnceRecord, now: number): number {
  if (record.ttlMs === undefined) return DEFAULT_RETENTION_MS;
  return Math.max(1_000, record.ttlMs + Math.max(0, now - record.updatedAt));
}

/**
 * Why an operator's resolution of `record` must be refused before it is tried, or undefined when it may
 * go ahead; the store's own fenced write still has the last word.
 */
export function resolveRefusal(
  record: OnceRecord | undefined,
  expectFence: number | undefined,
): string | undefined {
  if (record === undefined) return "no record for this key (never claimed, or expired after its retention)";
  if (record.state !== "unknown")
    return `the record is ${record.state}, not unknown; only an unknown record can be resolved`;
  if (expectFence !== undefined && record.fence !== expectFence)
    return `the record moved on (fence ${record.fence}, ${expectFence} seen)`;
  return undefined;
}

/**
 * An operator's resolution, the same on every store: refused before it is tried when `resolveRefusal` says so,
 * else written through `storeFor(retentionMs)` — the store opened with the record's own retention kept —
 * fenced on the fence just read, so a record that changed in between is refused by the store itself.
 */
export async function resolveFenced(
  operator: Pick<OperatorStore, "get" | "now">,
  storeFor: (retentionMs: number) => Promise<Pick<OnceStore, "resolve" | "get">>,
  key: string,
  request: OperatorResolveRequest,
): Promise<ResolveResult> {
  const record = await operator.get(key);
  const refusal = resolveRefusal(record, request.expectFence);
  if (record === undefined || refusal !== undefined)
    return { outcome: "refused", reason: refusal ?? "no record", record };
  const { retentionMs, ...resolve } = request;
  const store = await storeFor(retentionMs ?? retentionOf(record, await operator.now()));
  const outcome = await store.resolve(key, { ...resolve, expectFence: request.expectFence ?? record.fence });
  const after = await store.get(key);
  if (outcome.outcome === "ok") return { outcome: "resolved", fence: outcome.fence, record: after };
  const reason = outcome.outcome === "refused" ? outcome.reason : "the record changed meanwhile";
  return { outcome: "refused", reason, record: after };
}

/**
 * Why a decision about `record` must be refused before it is tried, or undefined when it may go ahead; the
 * store's own fenced write still has the last word.
 */
export function decisionRefusal(
  record: OnceRecord | undefined,
  request: Pick<OperatorDecisionRequest, "by" | "expectFence" | "fingerprint">,
  now: number,
): string | undefined {
  if (typeof request.by !== "string" || request.by.trim() === "")
    return "say who decides (by): it is kept on the record";
  if (record === undefined) return "no record for this key (never claimed, or expired after its retention)";
  if (record.state !== "awaiting_approval" || record.approval === undefined) {
    const decided = record.approval?.decision;
    const why =
      decided === undefined
        ? ""
        : decided.as === "expired"
          ? " (its approval request expired)"
          : ` (already ${decided.as} by ${decided.by})`;
    return `the record is ${record.state}${why}, not awaiting_approval; only a pending request can be decided`;
  }
  if (record.approval.expiresAt <= now) return "the approval request expired: the call fails for good";
  if (request.fingerprint !== undefined && request.fingerprint !== record.fingerprint)
    return `the fingerprint ${request.fingerprint} is not the record's (${record.fingerprint}): the decision would be about another call`;
  if (request.expectFence !== undefined && record.fence !== request.expectFence)
    return `the record moved on (fence ${record.fence}, ${request.expectFence} seen)`;
  return undefined;
}

/**
 * A person's decision, the same on every store: refused (DecisionRefusedError) before it is tried when
 * `decisionRefusal` says so, else written through `storeFor(retentionMs)` fenced on the fence just read and
 * bound to the record's fingerprint, so a record that changed in between is refused by the store itself.
 */
export async function decideFenced(
  operator: Pick<OperatorStore, "get" | "now">,
  storeFor: (retentionMs: number) => Promise<Pick<ApprovalStore, "decide" | "get">>,
  key: string,
  decision: "approved" | "denied",
  request: OperatorDecisionRequest,
): Promise<DecisionResult> {
  const record = await operator.get(key);
  const now = await operator.now();
  const refusal = decisionRefusal(record, request, now);
  if (record === undefined || refusal !== undefined)
    throw new DecisionRefusedError(key, decision, refusal ?? "no record");
  const store = await storeFor(request.retentionMs ?? retentionOf(record, now));
  const outcome = await store.decide(key, {
    decision,
    by: request.by,
    why: request.why ?? "",
    expectFence: request.expectFence ?? record.fence,
    fingerprint: request.fingerprint ?? record.fingerprint,
  });
  if (outcome.outcome !== "ok")
    throw new DecisionRefusedError(
      key,
      decision,
      outcome.outcome === "refused"
        ? `the store refused it: ${outcome.reason}`
        : "the record changed meanwhile",
    );
  return { fence: outcome.fence, record: await store.get(key) };
}
