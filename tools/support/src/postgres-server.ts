// A throwaway PostgreSQL server of a test's own — initdb into a temp dir, pg_ctl on a free port, trust auth,
// loopback only — for tests that stop or crash the server (the shared one on 5432 is never touched). initdb
// refuses to run as root: as root, the server's commands run as the `postgres` user, and the dir is theirs.

import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort } from "./free-port.js";
import { runCommand } from "./run-command.js";

export interface PostgresServerHandle {
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:<port>/postgres`. */
  readonly url: string;
  readonly dir: string;
  /**
   * Stops the server — `immediate`: what a crash leaves (no checkpoint; recovery replays the WAL on start),
   * `fast`: a clean shutdown — and starts it again on the same port and data.
   */
  restart(mode?: "immediate" | "fast"): Promise<{ downMs: number }>;
  /** Stops it and removes its dir. */
  stop(): Promise<void>;
}

/** Where initdb and pg_ctl are: POSTGRES_BIN_DIR, else the newest /usr/lib/postgresql/<n>/bin, else PATH. */
export function postgresBinDir(): string {
  const fromEnv = process.env.POSTGRES_BIN_DIR;
  if (fromEnv && existsSync(path.join(fromEnv, "initdb"))) return fromEnv;
  const root = "/usr/lib/postgresql";
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => existsSync(path.join(root, v, "bin", "initdb")))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0] !== undefined) return path.join(root, versions[0], "bin");
  }
  try {
    return path.dirname(execFileSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" }).trim());
  } catch {
    throw new Error(
      "no initdb: install PostgreSQL (Debian: apt-get install postgresql) or set POSTGRES_BIN_DIR",
    );
  }
}

const asRoot = typeof process.getuid === "function" && process.getuid() === 0;

/** Runs one of the server's commands, as `postgres` when this process is root; throws on a non-zero exit. */
async function serverCommand(bin: string, args: string[]): Promise<void> {
  const [file, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", bin, ...args]] : [bin, args];
  const run = await runCommand(file, argv, { timeoutMs: 60_000 });
  if (run.code !== 0)
    throw new Error(`${run.command} exited ${run.code}: ${run.stderr.trim() || run.stdout.trim()}`);
}

/** initdb's and starts a server; resolves once it takes connections. */
export async function startPostgresServer(): Promise<PostgresServerHandle> {
  const bin = postgresBinDir();
  const dir = mkdtempSync(path.join(os.tmpdir(), "once-postgres-"));
  chmodSync(dir, 0o755);
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    chownSync(dir, uid, gid);
  }
  const data = path.join(dir, "data");
  const port = await freePort();
  const start = () =>
    serverCommand(path.join(bin, "pg_ctl"), [
      "-D",
      data,
      "-l",
      path.join(dir, "log"),
      "-w",
      "-o",
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200`,
      "start",
    ]);
  const stopWith = (mode: "immediate" | "fast") =>
    serverCommand(path.join(bin, "pg_ctl"), ["-D", data, "-m", mode, "-w", "stop"]);
  try {
    await serverCommand(path.join(bin, "initdb"), [
      "-D",
      data,
      "-U",
      "postgres",
      "--auth=trust",
      "-E",
      "UTF8",
    ]);
    await start();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  let stopped = false;
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    dir,
    async restart(mode = "immediate") {
      const from = Date.now();
      await stopWith(mode);
      await start();
      return { downMs: Date.now() - from };
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await stopWith("fast").catch(() => stopWith("immediate").catch(() => {}));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
