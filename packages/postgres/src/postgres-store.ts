import { randomFillSync } from "node:crypto";
import {
  type ClaimOutcome,
  type ClaimRequest,
  DEFAULT_RETENTION_MS,
  type OnceRecord,
  type ResolveRequest,
  type StoredError,
  type StoreOptions,
  type TransactionalStore,
  type WriteOutcome,
} from "@once/core";
import type { Pool, PoolClient } from "pg";
import { checkPostgres, type PostgresReport } from "./check-postgres.js";
import { assertUsable, type MigrationResult, runMigrations, schemaVersion } from "./migrate.js";
import { type Names, namesFor } from "./names.js";
import { type ClaimRow, claimOutcome, type WriteRow, writeOutcome } from "./to-outcome.js";
import { type RecordRow, recordSelect, toRecord } from "./to-record.js";
import { toStoreError, withTimeout } from "./to-store-error.js";

export interface PostgresStoreOptions extends StoreOptions {
  /**
   * The pool; the store never ends it. Every transition is one query on it (one round trip). A transactional
   * tool holds one connection for its transaction while heartbeats use another: size it for both.
   */
  pool: Pool;
  /** The schema the store's table and functions live in, created if missing. Default `"once"`. */
  schema?: string;
  /** Prepended to the names of the table and functions, for several stores in one schema. Default `""`. */
  tablePrefix?: string;
  /**
   * Create or upgrade the schema (versioned migrations, under an advisory lock: concurrent starters wait for
   * each other). Default true. With false the schema must already be at this build's version.
   */
  migrate?: boolean;
  /** Run the start-up checks (see {@link checkPostgres}). Default true. */
  checks?: boolean;
  /**
   * How long one store call waits for PostgreSQL before failing closed with StoreUnavailableError. Default
   * 5000 ms. The statement may still run later; leases make that safe (a claim nobody holds runs out).
   */
  timeoutMs?: number;
}

/** What one sweep deleted. */
export interface SweepResult {
  deleted: number;
  batches: number;
}

/**
 * The dedup store on PostgreSQL: one row per key, one SQL function (one round trip) per transition, time from
 * the database's clock, every owner write fenced by the full owner token, retention by an `expires_at`
 * column (an expired record is absent to every transition; {@link PostgresStore.sweep} deletes it). Also a
 * {@link TransactionalStore}: a transactional tool's effect commits with its record. Build it with
 * {@link PostgresStore.create}.
 */
export class PostgresStore implements TransactionalStore<PoolClient> {
  readonly #pool: Pool;
  readonly #names: Names;
  readonly #timeoutMs: number;
  readonly #sql: Record<string, string>;
  /** How long a record outlives its last transition, in ms. */
  readonly retentionMs: number;
  /** The database the records are in (`current_database()`). */
  readonly database: string;
  readonly schema: string;
  readonly tablePrefix: string;
  /** What the start-up checks found; undefined when they were skipped. */
  readonly report: PostgresReport | undefined;
  /** What the migration run did; undefined with `migrate: false`. */
  readonly migration: MigrationResult | undefined;

  private constructor(
    options: PostgresStoreOptions,
    names: Names,
    database: string,
    report: PostgresReport | undefined,
    migration: MigrationResult | undefined,
  ) {
    this.#pool = options.pool;
    this.#names = names;
    this.#timeoutMs = options.timeoutMs ?? 5_000;
    this.retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    this.database = database;
    this.schema = names.schema;
    this.tablePrefix = names.tablePrefix;
    this.report = report;
    this.migration = migration;
    const call = (fn: string, params: number) =>
      `select * from ${names.q(fn)}(${Array.from({ length: params }, (_, i) => `$${i + 1}`).join(", ")})`;
    this.#sql = {
      claim: call("claim", 8),
      "begin-effect": call("begin_effect", 3),
      complete: call("complete", 4),
      "fail-terminal": call("fail_terminal", 4),
      release: call("release", 4),
      "mark-unknown": call("mark_unknown", 4),
      heartbeat: call("heartbeat", 4),
      "resolve-applied": call("resolve_applied", 4),
      "resolve-not-applied": call("resolve_not_applied", 3),
      "give-up": call("give_up", 4),
      resolve: call("resolve", 7),
      get: `${recordSelect(names)} where key = $1 and expires_at > ${names.q("now_ms")}()`,
    };
  }

  /**
   * Checks the names, runs the start-up checks (PostgresVersionError for a server that is too old,
   * PostgresConfigError for one the store cannot keep its promises on), then migrates the schema.
   */
  static async create(options: PostgresStoreOptions): Promise<PostgresStore> {
    const names = namesFor(options.schema ?? "once", options.tablePrefix ?? "");
    const retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    positiveInteger("retentionMs", retentionMs);
    const timeoutMs = options.timeoutMs ?? 5_000;
    positiveInteger("timeoutMs", timeoutMs);
    const { pool } = options;
    const report =
      options.checks === false
        ? undefined
        : await withTimeout(checkPostgres(pool, { schema: names.schema }), timeoutMs).catch((error) => {
            throw toStoreError("start-up checks", error);
          });
    let migration: MigrationResult | undefined;
    let database: string;
    try {
      if (options.migrate === false) assertUsable(names, await schemaVersion(pool, names));
      else migration = await runMigrations(pool, names);
      const { rows } = await pool.query<{ database: string }>("select current_database() as database");
      database = rows[0]?.database ?? "";
    } catch (error) {
      throw toStoreError("migration", error);
    }
    return new PostgresStore(options, names, database, report, migration);
  }

  async claim(request: ClaimRequest): Promise<ClaimOutcome> {
    positiveInteger("leaseMs", request.leaseMs);
    const rows = await this.#query<ClaimRow>("claim", [
      request.key,
      request.fingerprint,
      request.tool,
      request.phase,
      request.leaseMs,
      this.retentionMs,
      ownerNonce(),
      request.trace ?? "",
    ]);
    return claimOutcome(rows[0]);
  }

  async beginEffect(key: string, token: string): Promise<WriteOutcome> {
    return this.#write("begin-effect", [key, token, this.retentionMs]);
  }

  async complete(key: string, token: string, result: string): Promise<WriteOutcome> {
    return this.#write("complete", [key, token, result, this.retentionMs]);
  }

  async failTerminal(key: string, token: string, error: StoredError): Promise<WriteOutcome> {
    return this.#write("fail-terminal", [key, token, JSON.stringify(error), this.retentionMs]);
  }

  async release(key: string, token: string, options: { notApplied?: boolean } = {}): Promise<WriteOutcome> {
    return this.#write("release", [key, token, options.notApplied === true, this.retentionMs]);
  }

  async markUnknown(key: string, token: string, error?: StoredError): Promise<WriteOutcome> {
    return this.#write("mark-unknown", [key, token, errorArg(error), this.retentionMs]);
  }

  async heartbeat(key: string, token: string, leaseMs: number): Promise<WriteOutcome> {
    positiveInteger("leaseMs", leaseMs);
    return this.#write("heartbeat", [key, token, leaseMs, this.retentionMs]);
  }

  async resolveApplied(key: string, token: string, result: string): Promise<WriteOutcome> {
    return this.#write("resolve-applied", [key, token, result, this.retentionMs]);
  }

  async resolveNotApplied(key: string, token: string): Promise<WriteOutcome> {
    return this.#write("resolve-not-applied", [key, token, this.retentionMs]);
  }

  async giveUp(key: string, token: string, error?: StoredError): Promise<WriteOutcome> {
    return this.#write("give-up", [key, token, errorArg(error), this.retentionMs]);
  }

  async resolve(key: string, request: ResolveRequest): Promise<WriteOutcome> {
    const { decision } = request;
    const payload =
      decision.as === "applied"
        ? decision.result
        : decision.as === "failed"
          ? JSON.stringify(decision.error)
          : "";
    return this.#write("resolve", [
      key,
      decision.as,
      payload,
      request.by,
      request.why,
      request.expectFence ?? null,
      this.retentionMs,
    ]);
  }

  async get(key: string): Promise<OnceRecord | undefined> {
    const rows = await this.#query<RecordRow>("get", [key]);
    return rows[0] && toRecord(rows[0]);
  }

  async completeInTransaction(
    key: string,
    token: string,
    work: (transaction: PoolClient) => Promise<string>,
    options: { leaseMs: number },
  ): Promise<WriteOutcome> {
    positiveInteger("leaseMs", options.leaseMs);
    let client: PoolClient;
    try {
      client = await withTimeout(this.#pool.connect(), this.#timeoutMs);
    } catch (error) {
      throw toStoreError("transaction", error);
    }
    let broken = false;
    try {
      try {
        // One round trip. A transaction left idle longer than the lease (its owner frozen or gone) is ended
        // by the server, and the row lock `complete` took with it.
        await client.query(
          `begin; set local idle_in_transaction_session_timeout = ${Math.max(options.leaseMs, 1_000)}`,
        );
      } catch (error) {
        broken = true;
        throw toStoreError("transaction", error);
      }
      let result: string;
      try {
        result = await work(client);
      } catch (error) {
        await client.query("rollback").catch(() => {
          broken = true;
        });
        throw error;
      }
      let outcome: WriteOutcome;
      try {
        const { rows } = await client.query<WriteRow>(this.#sql.complete as string, [
          key,
          token,
          result,
          this.retentionMs,
        ]);
        outcome = writeOutcome("complete", rows[0]);
        await client.query(outcome.outcome === "ok" ? "commit" : "rollback");
      } catch (error) {
        broken = true;
        throw toStoreError("complete", error);
      }
      return outcome;
    } finally {
      client.release(broken);
    }
  }

  /**
   * Deletes expired records in batches of `batchSize` (default 1000), each its own short statement that skips
   * rows another transaction holds, so no sweep holds locks for long or waits for a claim. Run it on a timer
   * (or `once`'s CLI); reads never need it, since an expired record is absent anyway.
   */
  async sweep(options: { batchSize?: number; maxBatches?: number } = {}): Promise<SweepResult> {
    const batchSize = options.batchSize ?? 1_000;
    positiveInteger("batchSize", batchSize);
    const maxBatches = options.maxBatches ?? Number.POSITIVE_INFINITY;
    const records = this.#names.q("records");
    const sql = `delete from ${records} where ctid = any(array(
      select ctid from ${records} where expires_at <= ${this.#names.q("now_ms")}()
      order by expires_at limit $1 for update skip locked))`;
    let deleted = 0;
    let batches = 0;
    while (batches < maxBatches) {
      let count: number;
      try {
        count = (await withTimeout(this.#pool.query(sql, [batchSize]), this.#timeoutMs)).rowCount ?? 0;
      } catch (error) {
        throw toStoreError("sweep", error);
      }
      batches += 1;
      deleted += count;
      if (count < batchSize) break;
    }
    return { deleted, batches };
  }

  /**
   * Every live record, in key order, `batchSize` (default 500) per query: keyset pages, so no query holds a
   * snapshot or a lock for long. An expired record is absent here too. `after`: start past this key. For
   * PostgresOperatorStore (`once list`, `once stats`, the console).
   */
  async *scan(options: { batchSize?: number; after?: string } = {}): AsyncGenerator<OnceRecord> {
    const batchSize = options.batchSize ?? 500;
    positiveInteger("batchSize", batchSize);
    const sql = `${recordSelect(this.#names)} where key > $1 and expires_at > ${this.#names.q("now_ms")}()
      order by key limit $2`;
    let after = options.after ?? "";
    for (;;) {
      let rows: RecordRow[];
      try {
        rows = (await withTimeout(this.#pool.query<RecordRow>(sql, [after, batchSize]), this.#timeoutMs))
          .rows;
      } catch (error) {
        throw toStoreError("scan", error);
      }
      for (const row of rows) yield toRecord(row);
      if (rows.length < batchSize) return;
      after = (rows.at(-1) as RecordRow).key;
    }
  }

  /** The database's clock, in ms: the clock the records are written with. */
  async now(): Promise<number> {
    try {
      const { rows } = await withTimeout(
        this.#pool.query<{ now: string }>(`select ${this.#names.q("now_ms")}() as now`),
        this.#timeoutMs,
      );
      return Number(rows[0]?.now);
    } catch (error) {
      throw toStoreError("now", error);
    }
  }

  /** How many rows the table holds, expired ones not yet swept included. */
  async size(): Promise<{ rows: number; expired: number }> {
    try {
      const { rows } = await withTimeout(
        this.#pool.query<{ rows: string; expired: string }>(
          `select count(*) as rows, count(*) filter (where expires_at <= ${this.#names.q("now_ms")}()) as expired
           from ${this.#names.q("records")}`,
        ),
        this.#timeoutMs,
      );
      return { rows: Number(rows[0]?.rows), expired: Number(rows[0]?.expired) };
    } catch (error) {
      throw toStoreError("size", error);
    }
  }

  /** One statement, one round trip; whatever stands between us and PostgreSQL becomes StoreUnavailableError. */
  async #query<R extends object>(transition: string, values: unknown[]): Promise<R[]> {
    try {
      const result = await withTimeout(
        this.#pool.query<R>(this.#sql[transition] as string, values),
        this.#timeoutMs,
      );
      return result.rows;
    } catch (error) {
      throw toStoreError(transition, error);
    }
  }

  async #write(transition: string, values: unknown[]): Promise<WriteOutcome> {
    return writeOutcome(transition, (await this.#query<WriteRow>(transition, values))[0]);
  }
}

function errorArg(error: StoredError | undefined): string {
  return error === undefined ? "" : JSON.stringify(error);
}

function positiveInteger(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value <= 0)
    throw new RangeError(`${name} must be a positive integer, got ${value}`);
}

// As @once/redis: one CSPRNG fill per 512 claims.
const noncePool = Buffer.alloc(4096);
let nextNonce = noncePool.length;

/** 16 random hex characters: the owner part of a claim's token (`<fence>.<nonce>`). */
function ownerNonce(): string {
  if (nextNonce + 8 > noncePool.length) {
    randomFillSync(noncePool);
    nextNonce = 0;
  }
  const nonce = noncePool.toString("hex", nextNonce, nextNonce + 8);
  nextNonce += 8;
  return nonce;
}
