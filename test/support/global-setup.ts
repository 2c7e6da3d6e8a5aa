// Vitest globalSetup shared by the workspace packages that talk to Redis:
//   packageTestConfig({ globalSetup: ["../../test/support/global-setup.ts"] })
//
// 1. Fails the run (never skips it) when no Redis answers at REDIS_URL (default redis://127.0.0.1:6379).
// 2. Unless REDIS_CLUSTER_NODES is already set, starts a three-master Redis Cluster with
//    scripts/redis-cluster.mjs and sets REDIS_CLUSTER_NODES for the test workers (they inherit the
//    environment of this process, which is where globalSetup runs); it is also `provide`d as
//    "redisClusterNodes" (typed by the ProvidedContext augmentation in services.ts). The teardown stops that cluster.
// 3. Points ONCE_TEST_REDIS_REGISTRY at a temp dir where startRedisServer() records its processes, and the
//    teardown kills any a crashed or killed worker left behind.
// 4. Reaps clusters and servers left behind by an earlier vitest process that was killed before its teardown
//    (their temp dirs record the owner pid; only dirs whose owner is gone are touched).

import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { TestProject } from "vitest/node";
import { runCommand } from "./run-command.js";
import {
  pingRedis,
  REGISTRY_ENV,
  type RedisServerHandle,
  rawCommand,
  redisUrl,
  startRedisServer,
} from "./services.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const clusterScript = path.join(repoRoot, "scripts/redis-cluster.mjs");
const verbose = Boolean(process.env.ONCE_TEST_VERBOSE);

function say(message: string): void {
  if (verbose) process.stderr.write(`[global-setup] ${message}\n`);
}

/** Throws a clear error unless a Redis answers PING at `url`. */
async function assertRedisAnswers(url: string): Promise<void> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`REDIS_URL is not a valid URL: ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== "redis:") {
    // rediss:// and unix sockets: leave the check to the client the tests create.
    say(`not checking ${parsed.protocol} URL ${url}`);
    return;
  }
  const host = parsed.hostname.replace(/^\[(.*)\]$/, "$1") || "127.0.0.1";
  const port = parsed.port ? Number(parsed.port) : 6379;
  const password = parsed.password ? decodeURIComponent(parsed.password) : undefined;
  const username = parsed.username ? decodeURIComponent(parsed.username) : undefined;
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const reply = await rawCommand(host, port, ["PING"], {
        timeoutMs: 2000,
        ...(password !== undefined ? { password } : {}),
        ...(username !== undefined ? { username } : {}),
      });
      if (reply === "PONG") return;
      lastError = new Error(`unexpected reply ${JSON.stringify(reply)}`);
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  const reason = lastError instanceof Error ? lastError.message : String(lastError);
  throw new Error(
    `The tests need a Redis server, and none answers PING at ${url} (${reason}).\n` +
      "Start one, for example:\n" +
      "  redis-server --port 6379 --save '' --appendonly no --daemonize yes\n" +
      "  or: docker compose up -d redis\n" +
      "or point REDIS_URL at a running Redis. (This check fails the run on purpose: it never skips tests.)",
  );
}

async function runClusterScript(action: "start" | "stop", dir: string): Promise<string> {
  const run = await runCommand(process.execPath, [clusterScript, action, "--dir", dir], {
    cwd: process.cwd(),
  });
  if (verbose && run.stderr.trim()) process.stderr.write(run.stderr);
  if (run.code === 0) return run.stdout;
  throw new Error(
    `node scripts/redis-cluster.mjs ${action} failed (exit ${run.code}):\n${run.stderr.trim()}`,
  );
}

const OWNER_FILE = "owner.json";
const CLUSTER_PREFIX = "once-cluster-";
const REGISTRY_PREFIX = "once-redis-registry-";

/** Marks a temp dir as belonging to this vitest process, so a later run can reap it if we die. */
function makeOwnedTempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  writeFileSync(path.join(dir, OWNER_FILE), JSON.stringify({ pid: process.pid, startedAt: Date.now() }));
  return dir;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function ownerPid(dir: string): number | undefined {
  try {
    const { pid } = JSON.parse(readFileSync(path.join(dir, OWNER_FILE), "utf8")) as { pid?: unknown };
    return typeof pid === "number" ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Kills redis-server processes that startRedisServer() registered and nobody stopped. */
function reapRegisteredServers(registry: string): void {
  if (!existsSync(registry)) return;
  for (const name of readdirSync(registry)) {
    if (name === OWNER_FILE) continue;
    const file = path.join(registry, name);
    try {
      const entry = JSON.parse(readFileSync(file, "utf8")) as {
        pid?: unknown;
        port?: unknown;
        dir?: unknown;
      };
      const { pid, port, dir } = entry;
      if (typeof pid === "number" && typeof port === "number" && isRedisServer(pid, port)) {
        process.kill(pid, "SIGKILL");
        process.stderr.write(`[global-setup] killed leftover redis-server pid ${pid} on port ${port}\n`);
      }
      if (typeof dir === "string" && path.basename(dir).startsWith("once-redis-")) {
        rmSync(dir, { recursive: true, force: true });
      }
    } catch {
      // A half-written or vanished entry: nothing to reap.
    }
  }
  rmSync(registry, { recursive: true, force: true });
}

function isRedisServer(pid: number, port: number): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
    return cmdline.includes("redis-server") && cmdline.includes(String(port));
  } catch {
    return false;
  }
}

/**
 * Reaps what an earlier vitest process left behind when it was killed before its teardown (turbo cancels
 * the other tasks when one fails): clusters and registries whose owner process is gone.
 */
async function reapOrphans(): Promise<void> {
  let names: string[];
  try {
    names = readdirSync(os.tmpdir());
  } catch {
    return;
  }
  for (const name of names) {
    const isCluster = name.startsWith(CLUSTER_PREFIX);
    if (!isCluster && !name.startsWith(REGISTRY_PREFIX)) continue;
    const found = path.join(os.tmpdir(), name);
    const pid = ownerPid(found);
    if (pid === undefined || processAlive(pid)) continue;
    // Claim it first (rename is atomic), so that parallel vitest processes do not reap the same dir.
    const dir = `${found.replace(/\.reaping-\d+$/, "")}.reaping-${process.pid}`;
    try {
      renameSync(found, dir);
    } catch {
      continue;
    }
    if (isCluster) {
      await runClusterScript("stop", path.join(dir, "cluster")).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
      say(`reaped an orphaned Redis Cluster in ${dir} (owner pid ${pid} is gone)`);
    } else {
      reapRegisteredServers(dir);
    }
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  await reapOrphans();

  const registry = makeOwnedTempDir(REGISTRY_PREFIX);
  const previousRegistry = process.env[REGISTRY_ENV];
  process.env[REGISTRY_ENV] = registry;

  // With no REDIS_URL and nothing on the default port, `pnpm test` brings its own Redis (registered, so it
  // is reaped like any other), and a machine with only a redis-server binary runs the suite. An explicit
  // REDIS_URL that does not answer still fails the run.
  let ownRedis: RedisServerHandle | undefined;
  try {
    if (process.env.REDIS_URL === undefined && !(await pingRedis("127.0.0.1", 6379))) {
      ownRedis = await startRedisServer();
      process.env.REDIS_URL = ownRedis.url;
      say(`no Redis on 127.0.0.1:6379: started one at ${ownRedis.url}`);
    }
    await assertRedisAnswers(redisUrl());
  } catch (error) {
    reapRegisteredServers(registry);
    throw error;
  }

  // <tmp>/once-cluster-XXXX/{owner.json, cluster/}: the script wants an empty or missing dir of its own.
  let clusterHome: string | undefined;
  const existing = process.env.REDIS_CLUSTER_NODES?.trim();
  if (existing) {
    say(`using REDIS_CLUSTER_NODES=${existing}`);
    project.provide("redisClusterNodes", existing);
  } else {
    clusterHome = makeOwnedTempDir(CLUSTER_PREFIX);
    const clusterDir = path.join(clusterHome, "cluster");
    try {
      const stdout = await runClusterScript("start", clusterDir);
      const nodes = /^REDIS_CLUSTER_NODES=(.+)$/m.exec(stdout)?.[1]?.trim();
      if (!nodes) {
        throw new Error(`scripts/redis-cluster.mjs printed no REDIS_CLUSTER_NODES line:\n${stdout}`);
      }
      process.env.REDIS_CLUSTER_NODES = nodes;
      project.provide("redisClusterNodes", nodes);
      say(`started a Redis Cluster: REDIS_CLUSTER_NODES=${nodes} (dir ${clusterDir})`);
    } catch (error) {
      await runClusterScript("stop", clusterDir).catch(() => {});
      rmSync(clusterHome, { recursive: true, force: true });
      reapRegisteredServers(registry);
      throw error;
    }
  }

  return async () => {
    if (ownRedis) {
      await ownRedis.stop();
      delete process.env.REDIS_URL;
    }
    reapRegisteredServers(registry);
    if (previousRegistry === undefined) delete process.env[REGISTRY_ENV];
    else process.env[REGISTRY_ENV] = previousRegistry;
    if (clusterHome) {
      delete process.env.REDIS_CLUSTER_NODES;
      try {
        await runClusterScript("stop", path.join(clusterHome, "cluster"));
      } finally {
        rmSync(clusterHome, { recursive: true, force: true });
      }
      say(`stopped the Redis Cluster in ${clusterHome}`);
    }
  };
}
