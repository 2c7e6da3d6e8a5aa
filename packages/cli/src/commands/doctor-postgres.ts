import { diagnosePostgres, MINIMUM_POSTGRES_MAJOR, PostgresStore, SCHEMA_VERSION } from "@once/postgres";
import pg from "pg";
import type { CliIo } from "../cli-io.js";
import { CommandFailedError } from "../errors.js";
import { ExitCode } from "../exit-code.js";
import type { ParsedOptions } from "../parse-command-line.js";
import { jsonText } from "../record-view.js";
import { renderTable } from "../render-table.js";
import { POSTGRES_URL, storeUrlLabel } from "../store-url.js";

interface Finding {
  check: string;
  status: "ok" | "warn" | "fail";
  detail: string;
  fix?: string;
}

/** `once doctor --postgres-url`: what decides whether a PostgresStore can keep its promises there. */
export async function doctorPostgres(options: ParsedOptions, io: CliIo): Promise<number> {
  const url = options.string("postgres-url") as string;
  const label = storeUrlLabel(url, "--postgres-url", POSTGRES_URL);
  const schema = options.string("schema") ?? "once";
  const tablePrefix = options.string("table-prefix") ?? "";
  const pool = new pg.Pool({ connectionString: url, max: 2, connectionTimeoutMillis: 5_000 });
  pool.on("error", () => {});
  try {
    let report: Awaited<ReturnType<typeof diagnosePostgres>>;
    try {
      report = await diagnosePostgres(pool, { schema, level: "production" });
    } catch (error) {
      const cause = (error as { cause?: unknown }).cause;
      throw new CommandFailedError(
        `cannot reach PostgreSQL at ${label}: ${cause instanceof Error ? cause.message : String(error)}`,
        { cause: error },
      );
    }
    const findings: Finding[] = [...report.checks];
    // The store's own schema: migrated, and to this build's version?
    const store = await PostgresStore.create({
      pool,
      schema,
      tablePrefix,
      migrate: false,
      checks: false,
    }).then(
      (s) => s,
      (error: Error) => error,
    );
    if (store instanceof PostgresStore) {
      const size = await store.size();
      const skew = Math.abs((await store.now()) - Date.now());
      findings.push(
        { check: "schema", status: "ok", detail: `schema ${schema} at version ${SCHEMA_VERSION}` },
        {
          check: "records",
          status: size.expired > 100_000 ? "warn" : "ok",
          detail: `${size.rows} rows, ${size.expired} expired not yet swept`,
          ...(size.expired > 100_000 ? { fix: "run PostgresStore.sweep() on a timer" } : {}),
        },
        {
          check: "clock",
          status: skew > 1_000 ? "warn" : "ok",
          detail: `this machine's clock is ${skew} ms from the database's (leases use the database's)`,
        },
      );
    } else {
      findings.push({
        check: "schema",
        status: "warn",
        detail: store.message,
        fix: "PostgresStore.create({ pool, schema }) migrates it (migrate: true is the default)",
      });
    }
    const problems = findings.filter((f) => f.status === "fail");
    const warnings = findings.filter((f) => f.status === "warn");
    const ok = problems.length === 0;
    if (options.flag("json")) {
      io.stdout.write(
        jsonText({
          target: label,
          backend: "postgres",
          version: report.version,
          minimumMajor: MINIMUM_POSTGRES_MAJOR,
          ok,
          findings,
          unchecked: report.unchecked,
        }),
      );
      return ok ? ExitCode.ok : ExitCode.problem;
    }
    const out = [
      `once doctor: ${label} (PostgreSQL ${report.version}, database ${report.database}, role ${report.user})`,
      "",
      renderTable(
        ["check", "status", "detail"],
        findings.map((f) => [f.check, f.status === "ok" ? "ok" : f.status.toUpperCase(), f.detail]),
        { maxCellWidth: 100 },
      ),
    ];
    if (problems.length > 0) {
      out.push("", `Problems that can cause duplicates (${problems.length}):`);
      for (const p of problems) out.push(`  ${p.check}: ${p.detail}`, `    fix: ${p.fix ?? "-"}`);
    }
    if (warnings.length > 0) {
      out.push("", `Warnings (${warnings.length}):`);
      for (const w of warnings)
        out.push(`  ${w.check}: ${w.detail}`, ...(w.fix ? [`    fix: ${w.fix}`] : []));
    }
    out.push("", "Not checked (cannot be seen from a connection):", ...report.unchecked.map((u) => `  ${u}`));
    out.push(
      "",
      ok
        ? `no problems${warnings.length > 0 ? `, ${warnings.length} warning${warnings.length === 1 ? "" : "s"}` : ""}`
        : `${problems.length} problem${problems.length === 1 ? "" : "s"}: exit 1`,
    );
    io.stdout.write(`${out.join("\n")}\n`);
    return ok ? ExitCode.ok : ExitCode.problem;
  } finally {
    await pool.end();
  }
}
