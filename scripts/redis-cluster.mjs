#!/usr/bin/env node
// Starts and stops a throwaway three-master Redis Cluster for tests (the nodes and their directory are
// @once/support's startRedisCluster; build it first: `pnpm turbo run build --filter=@once/support`).
//
//   node scripts/redis-cluster.mjs start --dir <dir>   prints REDIS_CLUSTER_NODES=127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
//   node scripts/redis-cluster.mjs stop --dir <dir>    stops exactly the nodes started in <dir>, then removes <dir>
//
// REDIS_SERVER_BIN overrides the redis-server binary (default: redis-server on PATH); redis-cli is taken from
// the same directory when it exists there, else from PATH. Ports are picked free, with their cluster bus port
// (port + 10000) free as well. `start` on a directory whose cluster still runs prints the running cluster's
// nodes again; `stop` on a missing directory does nothing.

import path from "node:path";
import { loadSupport, UsageError, usageFailure } from "./support-cli.mjs";

const USAGE = "usage: node scripts/redis-cluster.mjs <start|stop> --dir <dir>";

function parseArgs(argv) {
  const [action, ...rest] = argv;
  let dir;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (arg === "--dir") dir = rest[++i];
    else if (arg.startsWith("--dir=")) dir = arg.slice("--dir=".length);
    else throw new UsageError(`unknown argument ${JSON.stringify(arg)}`);
  }
  if (action !== "start" && action !== "stop")
    throw new UsageError(`unknown command ${JSON.stringify(action)}`);
  if (!dir) throw new UsageError("--dir <dir> is required");
  return { action, dir: path.resolve(dir) };
}

async function main() {
  const { action, dir } = parseArgs(process.argv.slice(2));
  const { startRedisCluster, stopRedisCluster } = await loadSupport();
  const log = (message) => process.stderr.write(`[redis-cluster] ${message}\n`);
  if (action === "start") {
    const { nodes } = await startRedisCluster(dir, { log });
    process.stdout.write(`REDIS_CLUSTER_NODES=${nodes}\n`);
  } else {
    await stopRedisCluster(dir, { log });
  }
}

main().catch((error) => usageFailure("redis-cluster", USAGE, error));
