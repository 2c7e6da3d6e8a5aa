import {
  type ApprovalAsk,
  type ApprovalRequestOutcome,
  type ApprovalStore,
  type CancelOutcome,
  type CancelRequest,
  type ClaimOutcome,
  type ClaimRequest,
  DEFAULT_NAMESPACE,
  DEFAULT_RETENTION_MS,
  type DecisionRequest,
  deniedError,
  deriveTaskKey,
  type LivenessStore,
  type OnceRecord,
  type ResolveRequest,
  type StoredError,
  type StoreOptions,
  type TaskRecords,
  type TaskRef,
  type TaskStore,
  type TransactionalStore,
  type WriteOutcome,
} from "@once/core";
import {
  cancellableTaskKey,
  livenessTtl,
  ownerNonce,
  positiveInteger,
  withTimeout,
} from "@once/core/store-kit";
import type { Pool, PoolClient } from "pg";
import { checkPostgres, type PostgresReport } from "./check-postgres.js";
import { withClient } from "./checkout.js";
import { assertUsable, type MigrationResult, runMigrations, schemaVersion } from "./migrate.js";
import { type Names, namesFor } from "./names.js";
import { assertReadableLayout } from "./record-layout.js";
import {
  type ApprovalRequestRow,
  approvalRequestOutcome,
  type CancelRow,
  type ClaimRow,
  cancelOutcome,
  claimOutcome,
  type WriteRow,
  writeOutcome,
} from "./to-outcome.js";
import { cancellationOf, type RecordRow, recordColumns, recordSelect, toRecord } from "./to-record.js";
import { toStoreError } from "./to-store-error.js";

export interface PostgresStoreOptions extends StoreOptions {
  /**
   * The pool; the store never ends it. Every transition is one query on it (one round trip). A transactional
   * tool holds one connection for its transaction while heartbeats use another: size it for both. The store
   * listens for `error` on each connection it checks out; give the pool a listener for its idle ones.
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

/** The server a timed-out call names: `PostgreSQL did not answer within 5000 ms`. */
const SERVER = "PostgreSQL";

/** What one sweep deleted: `deleted` records in `batches` statements, and the rows of `tasks` whose retention ran out. */
export interface SweepResult {
  deleted: number;
  batches: number;
  tasks: number;
}

/** A row of the task read: the task's cancellation beside each filed record's columns (all null without one). */
type TaskRow = { [column in keyof RecordRow]: RecordRow[column] | null } & {
  task_cancel_by: string | null;
  task_cancel_why: string | null;
  task_cancel_at: string | null;
};

/**
 * The dedup store on PostgreSQL: one row per key, one SQL function (one round trip) per transition, time from
 * the database's clock, every owner write fenced by the full owner token, retention by an `expires_at`
 * column (an expired record is absent to every transition; {@link PostgresStore.sweep} deletes it). Also a
 * {@link TransactionalStore}: a transactional tool's effect commits with its record; and a {@link TaskStore}:
 * a claim that names its task is filed under it and refused once the task is cancelled. Build it with
 * {@link PostgresStore.create}.
 */
export class PostgresStore
  implements TransactionalStore<PoolClient>, ApprovalStore, TaskStore, LivenessStore
{
  readonly #pool: Pool;
  readonly #names: Names;
  readonly #timeoutMs: number;
  readonly #keepTaskIdentity: boolean;
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
    this.#keepTaskIdentity = options.keepTaskIdentity ?? true;
    this.retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    this.database = database;
    this.schema = names.schema;
    this.tablePrefix = names.tablePrefix;
    this.report = report;
    this.migration = migration;
    const call = (fn: string, params: number) =>
      `select * from ${names.q(fn)}(${Array.from({ length: params }, (_, i) => `$${i + 1}`).join(", ")})`;
    this.#sql = {
      claim: call("claim", 13),
      "liveness-open": call("liveness_open", 2),
      "liveness-renew": call("liveness_renew", 2),
      "liveness-end": call("liveness_end", 1),
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
      "request-approval": call("request_approval", 5),
      decide: call("decide", 8),
      "cancel-task": call("cancel_task", 6),
      get: `${recordSelect(names)} where key = $1 and expires_at > ${names.q("now_ms")}()`,
      // One query: the task's row (its cancellation) and every live record filed under it, in filing order.
      // Always one row at least, its record columns null when nothing is filed.
      "read-task": `select t.cancel_by as task_cancel_by, t.cancel_why as task_cancel_why,
          t.cancel_at as task_cancel_at, ${recordColumns("r", "c.now")}
        from (select ${names.q("now_ms")}() as now) c
        left join ${names.q("tasks")} t on t.task_key = $1 and t.expires_at > c.now
        left join ${names.q("records")} r on r.task_key = $1 and r.expires_at > c.now
        order by r.filed, r.key`,
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
        : await withTimeout(checkPostgres(pool, { schema: names.schema }), timeoutMs, SERVER).catch(
            (error) => {
              throw toStoreError("start-up checks", error);
            },
          );
    let migration: MigrationResult | undefined;
    let database: string;
    try {
      if (options.migrate === false) assertUsable(names, await schemaVersion(pool, names));
      else migration = await runMigrations(pool, names, { connectTimeoutMs: timeoutMs });
      const { rows } = await pool.query<{ database: string }>("select current_database() as database");
      database = rows[0]?.database ?? "";
    } catch (error) {
      throw toStoreError("migration", error);
    }
    return new PostgresStore(options, names, database, report, migration);
  }

  async claim(request: ClaimRequest): Promise<ClaimOutcome> {
    positiveInteger("leaseMs", request.leaseMs);
    const { task } = request;
    const taskKey = task === undefined ? null : deriveTaskKey(task);
    const identity = task !== undefined && this.#keepTaskIdentity ? task : undefined;
    const rows = await this.#query<ClaimRow>("claim", [
      request.key,
      request.fingerprint,
      request.tool,
      request.phase,
      request.leaseMs,
      this.retentionMs,
      ownerNonce(),
      request.trace ?? "",
      taskKey,
      identity?.namespace ?? null,
      identity?.taskId ?? null,
      identity?.stepId ?? null,
      request.liveness ?? null,
    ]);
    // A replay hands over the row's result or error as stored: refused when stored in a newer layout.
    assertReadableLayout(request.key, rows[0]?.layout);
    return claimOutcome(rows[0]);
  }

  async openLiveness(id: string, ttlMs: number): Promise<boolean> {
    livenessTtl(ttlMs);
    const rows = await this.#query<{ opened: boolean }>("liveness-open", [id, ttlMs]);
    return rows[0]?.opened === true;
  }

  async renewLiveness(id: string, ttlMs: number): Promise<boolean> {
    livenessTtl(ttlMs);
    const rows = await this.#query<{ renewed: boolean }>("liveness-renew", [id, ttlMs]);
    return rows[0]?.renewed === true;
  }

  async endLiveness(id: string): Promise<void> {
    await this.#query("liveness-end", [id]);
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

  async requestApproval(key: string, token: string, ask: ApprovalAsk): Promise<ApprovalRequestOutcome> {
    positiveInteger("ttlMs", ask.ttlMs);
    const rows = await this.#query<ApprovalRequestRow>("request-approval", [
      key,
      token,
      ask.reason,
      ask.ttlMs,
      this.retentionMs,
    ]);
    return approvalRequestOutcome(rows[0]);
  }

  async decide(key: string, request: DecisionRequest): Promise<WriteOutcome> {
    const denial = request.decision === "denied" ? JSON.stringify(deniedError(request.by, request.why)) : "";
    return this.#write("decide", [
      key,
      request.decision,
      denial,
      request.by,
      request.why,
      request.expectFence,
      request.fingerprint,
      this.retentionMs,
    ]);
  }

  /**
   * Cancels a task in one SQL function (one round trip): it waits for every claim of the task in progress,
   * keeps the cancellation, and stops or flags each filed call (see {@link CancelOutcome}). Once it returns,
   * every claim of the task is refused `cancelled`. Throws CancelRefusedError, nothing changed, without `by`
   * or for a task id that is not a valid key part.
   */
  async cancelTask(task: TaskRef, request: CancelRequest): Promise<CancelOutcome> {
    const taskKey = cancellableTaskKey(task, request);
    const identity = this.#keepTaskIdentity ? task : undefined;
    const rows = await this.#query<CancelRow>("cancel-task", [
      taskKey,
      identity === undefined ? null : (identity.namespace ?? DEFAULT_NAMESPACE),
      identity?.taskId ?? null,
      request.by,
      request.why,
      this.retentionMs,
    ]);
    return cancelOutcome(rows[0]);
  }

  /** The task's cancellation and every live call filed under it, in the order of their first claim: one query. */
  async readTask(task: TaskRef): Promise<TaskRecords> {
    const rows = await this.#query<TaskRow>("read-task", [deriveTaskKey(task)]);
    const first = rows[0];
    const cancellation = cancellationOf(first?.task_cancel_by, first?.task_cancel_why, first?.task_cancel_at);
    return {
      namespace: task.namespace ?? DEFAULT_NAMESPACE,
      taskId: task.taskId,
      ...(cancellation === undefined ? {} : { cancellation }),
      records: rows.filter((row) => row.key !== null).map((row) => toRecord(row as RecordRow)),
    };
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
    const checkout = { operation: "transaction", connectTimeoutMs: this.#timeoutMs };
    // A throw from here on rolls back (withClient); a session the server ends fails this call alone.
    return withClient(this.#pool, checkout, async (client) => {
      try {
        // One round trip. A transaction left idle longer than the lease (its owner frozen or gone) is ended
        // by the server, and the row lock `complete` took with it.
        await client.query(
          `begin; set local idle_in_transaction_session_timeout = ${Math.max(options.leaseMs, 1_000)}`,
        );
      } catch (error) {
        throw toStoreError("transaction", error);
      }
      const result = await work(client);
      try {
        const { rows } = await client.query<WriteRow>(this.#sql.complete as string, [
          key,
          token,
          result,
          this.retentionMs,
        ]);
        const outcome = writeOutcome("complete", rows[0]);
        await client.query(outcome.outcome === "ok" ? "commit" : "rollback");
        return outcome;
      } catch (error) {
        throw toStoreError("complete", error);
      }
    });
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
    const expired = (table: string) => `delete from ${table} where ctid = any(array(
      select ctid from ${table} where expires_at <= ${this.#names.q("now_ms")}()
      order by expires_at limit $1 for update skip locked))`;
    const batch = async (sql: string) => {
      try {
        return (await withTimeout(this.#pool.query(sql, [batchSize]), this.#timeoutMs, SERVER)).rowCount ?? 0;
      } catch (error) {
        throw toStoreError("sweep", error);
      }
    };
    let deleted = 0;
    let batches = 0;
    while (batches < maxBatches) {
      const count = await batch(expired(this.#names.q("records")));
      batches += 1;
      deleted += count;
      if (count < batchSize) break;
    }
    // A task's row only holds its cancellation (its calls are filed on their records), so one that has
    // expired is absent to every claim and cancel, as a record is.
    let tasks = 0;
    for (let task = 0; task < maxBatches; task++) {
      const count = await batch(expired(this.#names.q("tasks")));
      tasks += count;
      if (count < batchSize) break;
    }
    return { deleted, batches, tasks };
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
        rows = (
          await withTimeout(this.#pool.query<RecordRow>(sql, [after, batchSize]), this.#timeoutMs, SERVER)
        ).rows;
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
        SERVER,
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
        SERVER,
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
        SERVER,
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
