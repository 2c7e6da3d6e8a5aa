import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, pollUntil, runCommand } from "@once/support";
import pg from "pg";

/** A restate-server the bench started: its URLs, its pid (for its CPU), and how to stop it. */
export interface RestateServer {
  ingressUrl: string;
  adminUrl: string;
  pid: number;
  stop(): Promise<void>;
}

/**
 * The restate-server binary the `@restatedev/restate-server` package installed (its per-platform optional
 * dependency carries it): nothing is downloaded at run time. Throws, naming the package, when it is absent.
 */
export function restateServerBin(): string {
  const wrapper = createRequire(import.meta.url).resolve("@restatedev/restate-server/package.json");
  const platform = `@restatedev/restate-server-${os.platform()}-${os.arch()}`;
  try {
    return createRequire(wrapper).resolve(`${platform}/bin/restate-server`);
  } catch {
    throw new Error(
      `no restate-server binary: ${platform} is not installed (an optional dependency of @restatedev/restate-server)`,
    );
  }
}

/**
 * Starts restate-server in a throwaway directory on free loopback ports (ingress, admin, node-to-node; TCP
 * only, no Unix sockets), its usage telemetry off; resolves once the admin API and the ingress answer.
 */
export async function startRestate(): Promise<RestateServer> {
  const bin = restateServerBin();
  const dir = mkdtempSync(path.join(os.tmpdir(), "peers-restate-"));
  const [ingress, admin, fabric] = [await freePort(), await freePort(), await freePort()];
  const env = {
    ...process.env,
    RESTATE_LISTEN_MODE: "tcp",
    RESTATE_DISABLE_TELEMETRY: "true",
    RESTATE_LOG_FILTER: "warn",
    RESTATE_INGRESS__BIND_ADDRESS: `127.0.0.1:${ingress}`,
    RESTATE_ADMIN__BIND_ADDRESS: `127.0.0.1:${admin}`,
    RESTATE_BIND_ADDRESS: `127.0.0.1:${fabric}`,
  };
  let output = "";
  const child: ChildProcess = spawn(bin, ["--base-dir", dir, "--node-name", "bench", "--no-logo"], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const keep = (chunk: Buffer) => {
    output = `${output}${chunk.toString("utf8")}`.slice(-4000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  const stop = async () => {
    if (!gone) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const answers = async (url: string) => {
    try {
      return (await fetch(url)).ok;
    } catch {
      return false;
    }
  };
  const adminUrl = `http://127.0.0.1:${admin}`;
  const ingressUrl = `http://127.0.0.1:${ingress}`;
  const up = await pollUntil(
    async () =>
      gone || ((await answers(`${adminUrl}/health`)) && (await answers(`${ingressUrl}/restate/health`))),
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  if (!up || gone) {
    await stop();
    throw new Error(
      `restate-server did not start${gone ? " (it exited)" : " within 60 s"}: ${output.trim().slice(-600)}`,
    );
  }
  return { ingressUrl, adminUrl, pid: child.pid ?? 0, stop };
}

/** A PostgreSQL database made for one side of one run, and how to drop it. */
export interface ThrowawayDatabase {
  url: string;
  database: string;
  drop(): Promise<void>;
}

/** Creates a database named after `label` on the server at `serverUrl`; `drop()` removes it (FORCE). */
export async function createDatabase(serverUrl: string, label: string): Promise<ThrowawayDatabase> {
  const database = `peers_${label.replace(/[^a-z0-9]/g, "_")}_${randomBytes(3).toString("hex")}`;
  await withClient(serverUrl, (client) => client.query(`create database ${database}`));
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return {
    url: url.href,
    database,
    drop: () =>
      withClient(serverUrl, (client) =>
        client.query(`drop database if exists ${database} with (force)`),
      ).then(() => {}),
  };
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Builds the Workflow DevKit side's handler bundles with the `workflow` package's own CLI (`workflow build`,
 * its standalone target), from the compiled workflow file, in `bench/dist/peers/wdk` (inside the bench, so
 * the bundles resolve their imports from bench/node_modules). Returns that directory. The bundles are
 * CommonJS under a package that says `"type": "module"`: a package.json beside them says so.
 */
export async function buildWorkflow(): Promise<string> {
  const dir = fileURLToPath(new URL("./wdk/", import.meta.url));
  // The package exports no package.json: its root is two levels above its main module (dist/index.js).
  const root = path.dirname(path.dirname(createRequire(import.meta.url).resolve("workflow")));
  const cli = path.join(root, "bin/run.js");
  if (!existsSync(cli)) throw new Error(`no workflow CLI at ${cli}`);
  rmSync(path.join(dir, ".well-known"), { recursive: true, force: true });
  const run = await runCommand(process.execPath, [cli, "build"], { cwd: dir, timeoutMs: 300_000 });
  const out = path.join(dir, ".well-known/workflow/v1");
  if (run.code !== 0 || !existsSync(path.join(out, "flow.js")))
    throw new Error(`workflow build failed (${run.code}): ${(run.stderr || run.stdout).trim().slice(-600)}`);
  writeFileSync(path.join(out, "package.json"), '{ "type": "commonjs" }\n');
  return dir;
}
