import pg from "pg";
import { ProcessSetCpu } from "../proc-cpu.js";
import type { CpuMeter } from "./runner.js";

/**
 * The CPU of the PostgreSQL backends serving one database, from /proc (the server is on this machine): the
 * backends are listed in `pg_stat_activity` by a client connected to another database, so the listing's own
 * backend is not counted. The server's shared processes (WAL writer, checkpointer) serve every database and
 * are left out.
 */
export function postgresBackendsCpu(url: string, database: string): CpuMeter & { close(): Promise<void> } {
  const admin = new URL(url);
  admin.pathname = "/postgres";
  const client = new pg.Client({ connectionString: admin.href });
  client.on("error", () => {});
  const connected = client.connect();
  const set = new ProcessSetCpu();
  const pids = async () => {
    await connected;
    const { rows } = await client.query<{ pid: number }>(
      "select pid from pg_stat_activity where datname = $1",
      [database],
    );
    return rows.map((r) => r.pid);
  };
  return {
    async start() {
      set.start(await pids());
    },
    async seconds() {
      return set.since(await pids());
    },
    async close() {
      await client.end().catch(() => {});
    },
  };
}
