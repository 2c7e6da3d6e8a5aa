// Vitest globalSetup of the workspace packages whose tests talk to Redis:
//   packageTestConfig({ globalSetup: ["@once/support/global-setup"] })
//
// 1. Fails the run (never skips it) when no Redis answers at REDIS_URL (default redis://127.0.0.1:6379);
//    with no REDIS_URL and nothing on 127.0.0.1:6379, it starts a redis-server of its own first.
// 2. Unless REDIS_CLUSTER_NODES is already set, starts a three-master Redis Cluster and sets
//    REDIS_CLUSTER_NODES for the test workers (they inherit the environment of this process, which is where
//    globalSetup runs); it is also `provide`d as "redisClusterNodes". The teardown stops that cluster.
// 3. Points ONCE_TEST_REDIS_REGISTRY at a temp dir where startRedisServer() records its processes, and the
//    teardown kills any a crashed or killed worker left behind.
// 4. Reaps clusters and servers left behind by an earlier vitest process that was killed before its teardown
//    (their temp dirs record the owner pid; only dirs whose owner is gone are touched).

import { existsSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { portIsFree } from "./free-port.js";
import { CLUSTER_HOME_PREFIX, makeOwnedTempDir, OWNER_FILE, ownedClusterDir, ownerPid } from "./owned-dir.js";
import { pingRedis } from "./ping-redis.js";
import { type PostgresServerHandle, startPostgresServer } from "./postgres-server.js";
import { isRedisServerProcess, processAlive } from "./process-alive.js";
import { parseRedisUrl, redisUrl } from "./redis-address.js";
import { startRedisCluster, stopRedisCluster } from "./redis-cluster.js";
import { redisCommand } from "./redis-command.js";
import { REGISTRY_ENV, type RedisServerHandle, startRedisServer } from "./redis-server.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** Set by @once/support/global-setup: the same value as REDIS_CLUSTER_NODES. */
    redisClusterNodes: string;
  }
}

const verbose = Boolean(process.env.ONCE_TEST_VERBOSE);

function say(message: string): void {
  if (verbose) process.stderr.write(`[global-setup] ${message}\n`);
}

const clusterLog = (message: string) => say(`redis-cluster: ${message}`);

/** Throws a clear error unless a Redis answers PING at `url`. */
async function assertRedisAnswers(url: string): Promise<void> {
  let parts: ReturnType<typeof parseRedisUrl>;
  try {
    parts = parseRedisUrl(url);
  } catch {
    throw new Error(`REDIS_URL is not a valid URL: ${JSON.stringify(url)}`);
  }
  if (parts.protocol !== "redis:") {
    // rediss:// and unix sockets: leave the check to the client the tests create.
    say(`not checking ${parts.protocol} URL ${url}`);
    return;
  }
  const { host, port, ...auth } = parts;
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const reply = await redisCommand(host, port, ["PING"], {
        timeoutMs: 2000,
        ...(auth.password !== undefined ? { password: auth.password } : {}),
        ...(auth.username !== undefined ? { username: auth.username } : {}),
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

const REGISTRY_PREFIX = "once-redis-registry-";

/** Kills redis-server processes that startRedisServer() registered and nobody stopped. */
function reapRegisteredServers(registry: string): void {
  if (!existsSync(registry)) return;
  for (const name of readdirSync(registry)) {
    if (name === OWNER_FILE) continue;
    const file = path.join(registry, name);
    try {
      const { pid, port, dir } = JSON.parse(readFileSync(file, "utf8")) as {
        pid?: unknown;
        port?: unknown;
        dir?: unknown;
      };
      if (typeof pid === "number" && typeof port === "number" && isRedisServerProcess(pid, port)) {
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
    const isCluster = name.startsWith(CLUSTER_HOME_PREFIX);
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
      await stopRedisCluster(path.join(dir, "cluster"), { log: clusterLog }).catch(() => {});
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

  // PostgreSQL for the suites that use it, the way Redis is found: POSTGRES_URL, else a server on
  // 127.0.0.1:5432, else a throwaway one of ours (its binaries must be installed: the error says so).
  let ownPostgres: PostgresServerHandle | undefined;
  if (process.env.POSTGRES_URL === undefined && (await portIsFree(5432))) {
    try {
      ownPostgres = await startPostgresServer();
    } catch (error) {
      reapRegisteredServers(registry);
      throw new Error(
        `no PostgreSQL on 127.0.0.1:5432 and none could be started: ${(error as Error).message}`,
        {
          cause: error,
        },
      );
    }
    process.env.POSTGRES_URL = ownPostgres.url;
    say(`no PostgreSQL on 127.0.0.1:5432: started one at ${ownPostgres.url}`);
  }

  // <tmp>/once-cluster-XXXX/{owner.json, cluster/}: the cluster wants an empty or missing dir of its own.
  let clusterHome: string | undefined;
  const existing = process.env.REDIS_CLUSTER_NODES?.trim();
  if (existing) {
    say(`using REDIS_CLUSTER_NODES=${existing}`);
    project.provide("redisClusterNodes", existing);
  } else {
    const owned = ownedClusterDir();
    clusterHome = owned.home;
    const clusterDir = owned.dir;
    try {
      const { nodes } = await startRedisCluster(clusterDir, { log: clusterLog });
      process.env.REDIS_CLUSTER_NODES = nodes;
      project.provide("redisClusterNodes", nodes);
      say(`started a Redis Cluster: REDIS_CLUSTER_NODES=${nodes} (dir ${clusterDir})`);
    } catch (error) {
      await stopRedisCluster(clusterDir).catch(() => {});
      rmSync(clusterHome, { recursive: true, force: true });
      await ownPostgres?.stop().catch(() => {});
      reapRegisteredServers(registry);
      throw error;
    }
  }

  return async () => {
    if (ownPostgres) {
      await ownPostgres.stop();
      delete process.env.POSTGRES_URL;
    }
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
        await stopRedisCluster(path.join(clusterHome, "cluster"), { log: clusterLog });
      } finally {
        rmSync(clusterHome, { recursive: true, force: true });
      }
      say(`stopped the Redis Cluster in ${clusterHome}`);
    }
  };
}
