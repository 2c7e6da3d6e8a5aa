#!/usr/bin/env node
// CI's Redis, with @once/support (build it first: `pnpm turbo run build --filter=@once/support`):
//
//   node scripts/redis-server.mjs ping --port <port> [--host <host>]   exit 0 when a Redis answers PING there
//   node scripts/redis-server.mjs start --port <port> --dir <dir>     a daemonized redis-server on 127.0.0.1:<port>
//                                                                    (pid in <dir>/redis.pid, log in <dir>/redis.log);
//                                                                    prints its pid once it answers PING
//
// REDIS_SERVER_BIN overrides the redis-server binary (default: redis-server on PATH).

import path from "node:path";
import { loadSupport, UsageError, usageFailure } from "./support-cli.mjs";

const USAGE =
  "usage: node scripts/redis-server.mjs ping --port <port> [--host <host>]\n" +
  "       node scripts/redis-server.mjs start --port <port> --dir <dir>";

function parseArgs(argv) {
  const [action, ...rest] = argv;
  const values = { host: "127.0.0.1" };
  for (let i = 0; i < rest.length; i++) {
    const match = /^--(host|port|dir)(?:=(.*))?$/.exec(rest[i]);
    if (!match) throw new UsageError(`unknown argument ${JSON.stringify(rest[i])}`);
    values[match[1]] = match[2] ?? rest[++i];
  }
  const port = Number(values.port);
  if (action !== "ping" && action !== "start")
    throw new UsageError(`unknown command ${JSON.stringify(action)}`);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) throw new UsageError("--port <port> is required");
  if (action === "start" && !values.dir) throw new UsageError("--dir <dir> is required");
  return { action, host: values.host, port, dir: values.dir && path.resolve(values.dir) };
}

async function main() {
  const { action, host, port, dir } = parseArgs(process.argv.slice(2));
  const { pingRedis, startRedisServer } = await loadSupport();
  if (action === "ping") {
    process.exitCode = (await pingRedis(host, port, { timeoutMs: 2000 })) ? 0 : 1;
    return;
  }
  const server = await startRedisServer({ port, dir, detached: true });
  process.stdout.write(`${server.pid}\n`);
}

main().catch((error) => usageFailure("redis-server", USAGE, error));
