import {
  DEFAULT_RETENTION_MS,
  type OnceRecord,
  type OnceStore,
  type RecordState,
  type ResolveRequest,
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

/** A store as an operator sees it: records to find, count, read and resolve. */
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
  return { claimed: 0, reconciling: 0, released: 0, done: 0, failed: 0, unknown: 0 };
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
