import { type PostgresServerHandle, startPostgresServer } from "@once/support";
import pg from "pg";

export interface FoundPostgres {
  url: string;
  /** Where it came from, for the header line. */
  source: "POSTGRES_URL" | "local PostgreSQL" | "throwaway PostgreSQL";
  /** Stops the server the demo started (a no-op otherwise). */
  stop(): Promise<void>;
}

const LOCAL = "postgres://postgres@127.0.0.1:5432/postgres";

/**
 * A PostgreSQL for `--backend postgres`: `POSTGRES_URL` if set; else the local server on 5432 if it takes
 * `postgres` without a password; else a throwaway server (initdb and pg_ctl, on a free port), stopped by
 * `stop()`.
 */
export async function findPostgres(
  env: Record<string, string | undefined> = process.env,
): Promise<FoundPostgres> {
  if (env.POSTGRES_URL) return { url: env.POSTGRES_URL, source: "POSTGRES_URL", stop: async () => {} };
  if (await answers(LOCAL)) return { url: LOCAL, source: "local PostgreSQL", stop: async () => {} };
  const server: PostgresServerHandle = await startPostgresServer();
  return { url: server.url, source: "throwaway PostgreSQL", stop: () => server.stop() };
}

async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  client.on("error", () => {});
  try {
    await client.connect();
    await client.query("select 1");
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}
