import type { Pool } from "pg";
import { PostgresConfigError, PostgresVersionError } from "./errors.js";
import { toStoreError } from "./to-store-error.js";

/** The oldest PostgreSQL major version the store supports (the one BullMQ's Postgres backend needs too). */
export const MINIMUM_POSTGRES_MAJOR = 13;

/** `startup`: what PostgresStore.create refuses and warns about; `production` (once doctor) is stricter. */
export type PostgresCheckLevel = "startup" | "production";

export type PostgresCheckStatus = "ok" | "warn" | "fail";

export interface PostgresCheck {
  /** What was checked: a setting (`synchronous_commit`, `fsync`, …) or `version`, `recovery`, `privileges`. */
  check: string;
  status: PostgresCheckStatus;
  detail: string;
  /** What to change, when there is something to change. */
  fix?: string;
}

export interface PostgresReport {
  /** `server_version`, e.g. `15.20`. */
  version: string;
  versionNum: number;
  database: string;
  user: string;
  checks: PostgresCheck[];
  /** One line for each check that failed: what checkPostgres refuses with. */
  problems: string[];
  /** One line for each check that warned. */
  warnings: string[];
  /** What matters and cannot be seen from a connection: judge these yourself. */
  unchecked: string[];
}

interface Facts {
  version_num: string;
  version: string;
  in_recovery: boolean;
  read_only: string;
  synchronous_commit: string;
  fsync: string;
  full_page_writes: string;
  standbys: string;
  isolation: string;
  database: string;
  user: string;
  can_create: boolean;
  schema_exists: boolean;
  schema_usable: boolean;
}

/** Reads what the store depends on, in one query, and judges it. Never throws for a setting. */
export async function diagnosePostgres(
  pool: Pool,
  options: { schema?: string; level?: PostgresCheckLevel } = {},
): Promise<PostgresReport> {
  const schema = options.schema ?? "once";
  const production = (options.level ?? "startup") === "production";
  let facts: Facts;
  try {
    const { rows } = await pool.query<Facts>(
      `select current_setting('server_version_num') as version_num,
        current_setting('server_version') as version,
        pg_is_in_recovery() as in_recovery,
        current_setting('default_transaction_read_only') as read_only,
        current_setting('synchronous_commit') as synchronous_commit,
        current_setting('fsync') as fsync,
        current_setting('full_page_writes') as full_page_writes,
        current_setting('synchronous_standby_names') as standbys,
        current_setting('default_transaction_isolation') as isolation,
        current_database() as database, current_user as user,
        has_database_privilege(current_database(), 'CREATE') as can_create,
        exists (select 1 from pg_namespace where nspname = $1) as schema_exists,
        coalesce((select has_schema_privilege(oid, 'USAGE') from pg_namespace where nspname = $1), false)
          as schema_usable`,
      [schema],
    );
    facts = rows[0] as Facts;
  } catch (error) {
    throw toStoreError("start-up checks", error);
  }
  const versionNum = Number(facts.version_num);
  const checks: PostgresCheck[] = [];
  const major = Math.floor(versionNum / 10_000);
  checks.push(
    major >= MINIMUM_POSTGRES_MAJOR
      ? { check: "version", status: "ok", detail: `PostgreSQL ${facts.version}` }
      : {
          check: "version",
          status: "fail",
          detail: `PostgreSQL ${facts.version} is older than ${MINIMUM_POSTGRES_MAJOR}`,
          fix: `upgrade to PostgreSQL ${MINIMUM_POSTGRES_MAJOR} or newer`,
        },
  );
  checks.push(
    facts.in_recovery || facts.read_only === "on"
      ? {
          check: "recovery",
          status: "fail",
          detail: facts.in_recovery
            ? "the server is a standby in recovery: it cannot write records"
            : "default_transaction_read_only is on: the store cannot write records",
          fix: "connect to the primary, read-write",
        }
      : { check: "recovery", status: "ok", detail: "a read-write primary" },
  );
  const syncOff = facts.synchronous_commit === "off";
  checks.push(
    syncOff
      ? {
          check: "synchronous_commit",
          status: production ? "fail" : "warn",
          detail:
            "synchronous_commit is off: a crash can lose commits already acknowledged, and a lost claim or result repeats an effect",
          fix: "set synchronous_commit = on (for the store's role: ALTER ROLE … SET synchronous_commit = on)",
        }
      : {
          check: "synchronous_commit",
          status: "ok",
          detail: `synchronous_commit is ${facts.synchronous_commit}`,
        },
  );
  checks.push(
    facts.fsync === "off" || facts.full_page_writes === "off"
      ? {
          check: "fsync",
          status: production ? "fail" : "warn",
          detail: `fsync is ${facts.fsync}, full_page_writes is ${facts.full_page_writes}: a crash of the server can lose or corrupt records`,
          fix: "set fsync = on and full_page_writes = on",
        }
      : { check: "fsync", status: "ok", detail: "fsync and full_page_writes are on" },
  );
  checks.push(
    facts.isolation === "read committed"
      ? { check: "isolation", status: "ok", detail: "default_transaction_isolation is read committed" }
      : {
          check: "isolation",
          status: "warn",
          detail: `default_transaction_isolation is ${facts.isolation}: concurrent claims of one key can fail with serialization errors, which the store reports as unavailable`,
          fix: "use read committed for the store's role",
        },
  );
  const privileged = facts.schema_exists ? facts.schema_usable : facts.can_create;
  checks.push(
    privileged
      ? {
          check: "privileges",
          status: "ok",
          detail: facts.schema_exists
            ? `${facts.user} may use schema ${schema}`
            : `${facts.user} may create schema ${schema}`,
        }
      : {
          check: "privileges",
          status: "fail",
          detail: facts.schema_exists
            ? `${facts.user} has no USAGE on schema ${schema}`
            : `schema ${schema} does not exist and ${facts.user} may not create it in ${facts.database}`,
          fix: facts.schema_exists
            ? `GRANT USAGE, CREATE ON SCHEMA ${schema} TO ${facts.user}`
            : `CREATE SCHEMA ${schema} AUTHORIZATION ${facts.user}, or GRANT CREATE ON DATABASE ${facts.database}`,
        },
  );
  const unchecked = [
    "whether the disks honour fsync (a write cache that lies loses acknowledged records in a power cut)",
    facts.standbys === ""
      ? "replication: synchronous_standby_names is empty, so a failover to an asynchronous standby can lose records acknowledged here; whether failover is configured cannot be seen from a connection"
      : `replication: synchronous_standby_names is ${facts.standbys}; whether those standbys are connected, and what a failover promotes, cannot be seen from here`,
  ];
  return {
    version: facts.version,
    versionNum,
    database: facts.database,
    user: facts.user,
    checks,
    problems: checks.filter((c) => c.status === "fail").map(line),
    warnings: checks.filter((c) => c.status === "warn").map(line),
    unchecked,
  };
}

/**
 * The start-up checks: refuses a server older than {@link MINIMUM_POSTGRES_MAJOR} (PostgresVersionError) and
 * one the store cannot keep its promises on (PostgresConfigError); the report carries the warnings.
 */
export async function checkPostgres(pool: Pool, options: { schema?: string } = {}): Promise<PostgresReport> {
  const report = await diagnosePostgres(pool, { ...options, level: "startup" });
  if (Math.floor(report.versionNum / 10_000) < MINIMUM_POSTGRES_MAJOR)
    throw new PostgresVersionError(report.version, MINIMUM_POSTGRES_MAJOR);
  const failed = report.checks.find((c) => c.status === "fail");
  if (failed) throw new PostgresConfigError(failed.check, line(failed));
  return report;
}

function line(check: PostgresCheck): string {
  return `${check.check}: ${check.detail}${check.fix ? ` (${check.fix})` : ""}`;
}
