import {
  type CancelOutcome,
  type CancelRequest,
  DEFAULT_RETENTION_MS,
  type DecisionResult,
  type ListRequest,
  type OnceRecord,
  type OperatorDecisionRequest,
  type OperatorResolveRequest,
  type OperatorStore,
  type RecordCounts,
  type RecordPage,
  type ResolveResult,
  type TaskRecords,
  type TaskRef,
} from "@once/core";
import { retentionOf } from "@once/core/internal";
import { decideFenced, matchesFilter, RecordTally, resolveFenced } from "@once/core/store-kit";
import type { Pool } from "pg";
import { PostgresStore } from "./postgres-store.js";

export interface PostgresOperatorStoreOptions {
  /** The pool; never ended by the store. */
  pool: Pool;
  /** The PostgresStore's schema. Default `"once"`. */
  schema?: string;
  /** The PostgresStore's table prefix. Default `""`. */
  tablePrefix?: string;
  /** Where the records are, for people (`label`). Never put a password here. Default the schema and table. */
  label?: string;
  /** How long one call waits for PostgreSQL before StoreUnavailableError. Default 5000 ms. */
  timeoutMs?: number;
  /** As the PostgresStore's: false keeps no namespace or task id on a task a cancel creates. Default true. */
  keepTaskIdentity?: boolean;
}

const DEFAULT_SAMPLE = 10_000;

/**
 * The records of a PostgresStore as an operator sees them: listed and counted in key order with keyset pages
 * (the cursor is the last key looked at), read and resolved through the store's own functions. Build it with
 * {@link PostgresOperatorStore.create}: it needs the schema at this build's version and migrates nothing.
 */
export class PostgresOperatorStore implements OperatorStore {
  readonly label: string;
  readonly schema: string;
  readonly tablePrefix: string;
  readonly #pool: Pool;
  readonly #timeoutMs: number;
  readonly #keepTaskIdentity: boolean;
  readonly #reader: PostgresStore;

  private constructor(options: PostgresOperatorStoreOptions, reader: PostgresStore) {
    this.#pool = options.pool;
    this.schema = options.schema ?? "once";
    this.tablePrefix = options.tablePrefix ?? "";
    this.#timeoutMs = options.timeoutMs ?? 5_000;
    this.#keepTaskIdentity = options.keepTaskIdentity ?? true;
    this.#reader = reader;
    this.label = options.label ?? `PostgreSQL ${this.schema}.${this.tablePrefix}records`;
  }

  static async create(options: PostgresOperatorStoreOptions): Promise<PostgresOperatorStore> {
    const reader = await PostgresStore.create({
      pool: options.pool,
      schema: options.schema ?? "once",
      tablePrefix: options.tablePrefix ?? "",
      migrate: false,
      checks: false,
      timeoutMs: options.timeoutMs ?? 5_000,
    });
    return new PostgresOperatorStore(options, reader);
  }

  now(): Promise<number> {
    return this.#reader.now();
  }

  get(key: string): Promise<OnceRecord | undefined> {
    return this.#reader.get(key);
  }

  /** Rows of the records table, expired ones not yet swept included. */
  size(): Promise<{ rows: number; expired: number }> {
    return this.#reader.size();
  }

  async list(request: ListRequest): Promise<RecordPage> {
    const now = await this.now();
    const records: OnceRecord[] = [];
    let examined = 0;
    let last: string | undefined;
    let exhausted = true;
    const batchSize = Math.min(500, Math.max(1, request.limit));
    for await (const record of this.#reader.scan({
      batchSize,
      ...(request.cursor === undefined ? {} : { after: request.cursor }),
    })) {
      examined++;
      last = record.key;
      if (matchesFilter(record, request, now)) records.push(record);
      if (
        records.length >= request.limit ||
        (request.maxExamined !== undefined && examined >= request.maxExamined)
      ) {
        exhausted = false;
        break;
      }
    }
    const cursor = exhausted ? undefined : last;
    return { records, examined, skipped: 0, now, ...(cursor === undefined ? {} : { cursor }) };
  }

  async count(options: { sample?: number } = {}): Promise<RecordCounts> {
    const sample = options.sample ?? DEFAULT_SAMPLE;
    const now = await this.now();
    const tally = new RecordTally(now);
    let sampled = false;
    for await (const record of this.#reader.scan()) {
      if (tally.records >= sample) {
        sampled = true;
        break;
      }
      tally.add(record);
    }
    const { rows } = await this.size();
    return tally.counts({ sampled, skipped: 0, totalKeys: rows });
  }

  resolve(key: string, request: OperatorResolveRequest): Promise<ResolveResult> {
    return resolveFenced(this, (retentionMs) => this.#storeWith(retentionMs), key, request);
  }

  approve(key: string, request: OperatorDecisionRequest): Promise<DecisionResult> {
    return decideFenced(this, (retentionMs) => this.#storeWith(retentionMs), key, "approved", request);
  }

  deny(key: string, request: OperatorDecisionRequest): Promise<DecisionResult> {
    return decideFenced(this, (retentionMs) => this.#storeWith(retentionMs), key, "denied", request);
  }

  /**
   * Cancels the task through the store's own function. The cancellation and the records it writes get the
   * longest retention any of the task's records was written with (the default when it has none yet), so the
   * task stays cancelled while any of them could be retried.
   */
  async cancel(task: TaskRef, request: CancelRequest): Promise<CancelOutcome> {
    const now = await this.now();
    const { records } = await this.#reader.readTask(task);
    const retentionMs = records.reduce(
      (longest, record) => Math.max(longest, retentionOf(record, now)),
      records.length === 0 ? DEFAULT_RETENTION_MS : 0,
    );
    return (await this.#storeWith(retentionMs)).cancelTask(task, request);
  }

  task(task: TaskRef): Promise<TaskRecords> {
    return this.#reader.readTask(task);
  }

  /** The store's own functions, with the retention a written record gets. */
  #storeWith(retentionMs: number): Promise<PostgresStore> {
    return PostgresStore.create({
      pool: this.#pool,
      schema: this.schema,
      tablePrefix: this.tablePrefix,
      migrate: false,
      checks: false,
      timeoutMs: this.#timeoutMs,
      retentionMs,
      keepTaskIdentity: this.#keepTaskIdentity,
    });
  }
}
