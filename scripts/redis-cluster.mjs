#!/usr/bin/env node
// Starts and stops a throwaway three-master Redis Cluster for tests, with no dependencies.
//
//   node scripts/redis-cluster.mjs start --dir <dir>   prints REDIS_CLUSTER_NODES=127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
//   node scripts/redis-cluster.mjs stop --dir <dir>    stops exactly the nodes started in <dir>, then removes <dir>
//
// REDIS_SERVER_BIN overrides the redis-server binary (default: redis-server on PATH); redis-cli is taken from
// the same directory when it exists there, else from PATH. Ports are picked free (bound to port 0 by the kernel) with their
// cluster bus port (port + 10000) free as well. `start` on a directory whose cluster still runs prints the
// running cluster's nodes again; `stop` on a missing directory does nothing.

import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";

const HOST = "127.0.0.1";
const NODE_COUNT = 3;
const STATE_FILE = ".redis-cluster.json";
const STATE_KIND = "once-redis-cluster";

class UsageError extends Error {}

function log(message) {
  process.stderr.write(`[redis-cluster] ${message}\n`);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function redisServerBin() {
  return process.env.REDIS_SERVER_BIN || "redis-server";
}

function redisCliBin() {
  const server = process.env.REDIS_SERVER_BIN;
  if (server?.includes("/")) {
    const sibling = path.join(path.dirname(server), "redis-cli");
    if (existsSync(sibling)) return sibling;
  }
  return "redis-cli";
}

/** Fails with a clear message when a binary cannot be run. */
function requireBinary(bin, envName) {
  const result = spawnSync(bin, ["--version"], { encoding: "utf8" });
  if (result.error) {
    const how =
      "install Redis (Debian/Ubuntu: `apt-get install -y redis-server`, macOS: `brew install redis`)" +
      ` or set ${envName} to its path`;
    throw new Error(`cannot run \`${bin}\` (${result.error.code ?? result.error.message}): ${how}`);
  }
  return result.stdout.trim();
}

// ---------------------------------------------------------------------------------------------------------
// A minimal RESP client: one command per connection, enough for PING / INFO / CLUSTER INFO / SHUTDOWN.

function encodeCommand(args) {
  let out = `*${args.length}\r\n`;
  for (const arg of args) out += `$${Buffer.byteLength(String(arg))}\r\n${arg}\r\n`;
  return out;
}

/** Parses one RESP2 reply from the start of `buf`; returns undefined when incomplete. */
function parseReply(buf) {
  const lineEnd = buf.indexOf("\r\n");
  if (lineEnd < 0) return undefined;
  const type = String.fromCharCode(buf[0]);
  const line = buf.toString("utf8", 1, lineEnd);
  if (type === "+" || type === ":") return { value: line };
  if (type === "-") return { error: line };
  if (type === "$") {
    const length = Number(line);
    if (length < 0) return { value: null };
    if (buf.length < lineEnd + 2 + length + 2) return undefined;
    return { value: buf.toString("utf8", lineEnd + 2, lineEnd + 2 + length) };
  }
  return { error: `unexpected RESP reply type ${JSON.stringify(type)}` };
}

/** Sends one command; resolves with the reply, rejects on connection errors, error replies and timeouts. */
function command(port, args, timeoutMs = 2000) {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ host: HOST, port });
    let buf = Buffer.alloc(0);
    let done = false;
    const finish = (error, value) => {
      if (done) return;
      done = true;
      socket.destroy();
      if (error) reject(error);
      else resolve(value);
    };
    socket.setTimeout(timeoutMs, () => finish(new Error(`timeout talking to ${HOST}:${port}`)));
    socket.on("connect", () => socket.write(encodeCommand(args)));
    socket.on("data", (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      const reply = parseReply(buf);
      if (!reply) return;
      if ("error" in reply) finish(new Error(`${HOST}:${port}: ${reply.error}`));
      else finish(null, reply.value);
    });
    socket.on("error", (error) => finish(error));
    socket.on("close", () => finish(new Error(`connection to ${HOST}:${port} closed`)));
  });
}

async function ping(port) {
  try {
    return (await command(port, ["PING"], 500)) === "PONG";
  } catch {
    return false;
  }
}

function infoField(info, field) {
  const match = new RegExp(`^${field}:(.*)$`, "m").exec(info ?? "");
  return match ? match[1].trim() : undefined;
}

// ---------------------------------------------------------------------------------------------------------
// Ports and processes.

function portIsFree(port) {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once("error", () => resolve(false));
    server.listen({ host: HOST, port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

function kernelPort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once("error", reject);
    server.listen({ host: HOST, port: 0, exclusive: true }, () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

/** Picks `count` distinct ports whose cluster bus ports (port + 10000) are free too. */
async function pickPorts(count, avoid = new Set()) {
  const ports = [];
  for (let attempt = 0; ports.length < count && attempt < 500; attempt++) {
    const port = await kernelPort();
    if (port <= 0 || port + 10000 > 65535) continue;
    if (
      avoid.has(port) ||
      ports.includes(port) ||
      ports.includes(port + 10000) ||
      ports.includes(port - 10000)
    )
      continue;
    if (await portIsFree(port + 10000)) ports.push(port);
  }
  if (ports.length < count)
    throw new Error("could not find free ports (with free bus ports at port + 10000)");
  return ports;
}

function processAlive(pid) {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    return error.code === "EPERM";
  }
  // A zombie still answers kill(0); treat it as gone.
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return true;
  }
}

/** True when `pid` is (as far as we can tell) the redis-server we started on `port`. */
function isOurRedis(pid, port) {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
    return cmdline.includes("redis-server") && cmdline.includes(`:${port}`);
  } catch {
    // No /proc (macOS): trust the pid file only if something still answers on the port with that pid.
    return false;
  }
}

function readPid(dir, port) {
  try {
    const pid = Number(readFileSync(path.join(dir, `${port}.pid`), "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

async function waitFor(predicate, timeoutMs, intervalMs = 100) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await predicate()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(intervalMs);
  }
}

function tailLog(dir, port) {
  try {
    const lines = readFileSync(path.join(dir, `${port}.log`), "utf8")
      .trimEnd()
      .split("\n");
    return lines.slice(-8).join("\n");
  } catch {
    return "(no log)";
  }
}

// ---------------------------------------------------------------------------------------------------------
// State.

function readState(dir) {
  try {
    const state = JSON.parse(readFileSync(path.join(dir, STATE_FILE), "utf8"));
    return state && state.kind === STATE_KIND && Array.isArray(state.ports) ? state : undefined;
  } catch {
    return undefined;
  }
}

function writeState(dir, ports) {
  const state = { kind: STATE_KIND, host: HOST, ports, startedAt: new Date().toISOString() };
  writeFileSync(path.join(dir, STATE_FILE), `${JSON.stringify(state, null, 2)}\n`);
}

function nodesLine(ports) {
  return ports.map((port) => `${HOST}:${port}`).join(",");
}

async function clusterHealthy(ports) {
  for (const port of ports) {
    try {
      const info = await command(port, ["CLUSTER", "INFO"]);
      if (infoField(info, "cluster_state") !== "ok") return false;
      if (infoField(info, "cluster_slots_assigned") !== "16384") return false;
      if (Number(infoField(info, "cluster_known_nodes")) !== ports.length) return false;
    } catch {
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------
// Commands.

async function startNode(dir, port) {
  const args = [
    "--port",
    String(port),
    "--bind",
    HOST,
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    path.join(dir, `nodes-${port}.conf`),
    "--cluster-node-timeout",
    "5000",
    "--dir",
    dir,
    "--save",
    "",
    "--appendonly",
    "no",
    "--daemonize",
    "yes",
    "--pidfile",
    path.join(dir, `${port}.pid`),
    "--logfile",
    path.join(dir, `${port}.log`),
    "--maxmemory-policy",
    "noeviction",
  ];
  const result = spawnSync(redisServerBin(), args, { encoding: "utf8" });
  if (result.error) throw new Error(`cannot run ${redisServerBin()}: ${result.error.message}`);
  if (result.status !== 0) {
    throw new Error(
      `redis-server on port ${port} exited with ${result.status}: ${result.stderr || result.stdout}`,
    );
  }
  const up = await waitFor(() => ping(port), 10_000);
  if (!up)
    throw new Error(`redis-server on port ${port} did not answer PING; its log:\n${tailLog(dir, port)}`);
}

function runClusterCreate(ports) {
  return new Promise((resolve, reject) => {
    const args = [
      "--cluster",
      "create",
      ...ports.map((port) => `${HOST}:${port}`),
      "--cluster-replicas",
      "0",
      "--cluster-yes",
    ];
    const child = spawn(redisCliBin(), args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk) => {
      output += chunk;
    });
    child.stderr.on("data", (chunk) => {
      output += chunk;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${redisCliBin()}: ${error.message}`));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0 && !/\[ERR\]/.test(output)) resolve(output);
      else reject(new Error(`redis-cli --cluster create failed (${signal ?? code}):\n${output.trim()}`));
    });
  });
}

async function stopNode(dir, port) {
  const pid = readPid(dir, port);
  // Only shut down the server on this port if it is the one whose pid we recorded.
  let served = false;
  try {
    const info = await command(port, ["INFO", "server"]);
    served = pid !== undefined && Number(infoField(info, "process_id")) === pid;
  } catch {
    served = false;
  }
  if (served) {
    try {
      await command(port, ["SHUTDOWN", "NOSAVE"]);
    } catch {
      // The server closes the connection without replying when it shuts down.
    }
  } else if (pid !== undefined && processAlive(pid) && isOurRedis(pid, port)) {
    process.kill(pid, "SIGTERM");
  } else {
    return false;
  }
  if (pid !== undefined && !(await waitFor(() => !processAlive(pid), 10_000))) {
    log(`redis-server pid ${pid} (port ${port}) ignored SHUTDOWN/SIGTERM; sending SIGKILL`);
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
    await waitFor(() => !processAlive(pid), 5_000);
  }
  return true;
}

/** Ports recorded in `dir`: from the state file, else from pid files. */
function recordedPorts(dir) {
  const state = readState(dir);
  if (state) return state.ports;
  try {
    return readdirSync(dir)
      .map((name) => /^(\d+)\.pid$/.exec(name)?.[1])
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

async function stop(dir) {
  if (!existsSync(dir)) {
    log(`nothing to stop: ${dir} does not exist`);
    return;
  }
  const state = readState(dir);
  const ports = recordedPorts(dir);
  if (!state && ports.length === 0) {
    throw new Error(
      `${dir} was not created by this script (no ${STATE_FILE} or pid files); refusing to remove it`,
    );
  }
  for (const port of ports) {
    const stopped = await stopNode(dir, port);
    log(stopped ? `stopped node ${HOST}:${port}` : `node ${HOST}:${port} was not running`);
  }
  rmSync(dir, { recursive: true, force: true });
  log(`removed ${dir}`);
}

async function start(dir) {
  const serverVersion = requireBinary(redisServerBin(), "REDIS_SERVER_BIN");
  requireBinary(redisCliBin(), "REDIS_SERVER_BIN (redis-cli is looked up next to it)");

  const previous = readState(dir);
  if (previous) {
    if (await clusterHealthy(previous.ports)) {
      log(`a cluster started in ${dir} is already running`);
      return previous.ports;
    }
    log(`a previous cluster in ${dir} is not healthy; stopping what is left of it`);
    await stop(dir);
  } else if (existsSync(dir) && readdirSync(dir).length > 0) {
    throw new Error(`${dir} exists and is not empty; give start an empty or missing directory`);
  }
  mkdirSync(dir, { recursive: true });
  log(serverVersion);

  let lastError;
  const tried = new Set();
  for (let attempt = 1; attempt <= 3; attempt++) {
    const ports = await pickPorts(NODE_COUNT, tried);
    for (const port of ports) tried.add(port);
    writeState(dir, ports);
    try {
      for (const port of ports) await startNode(dir, port);
      await runClusterCreate(ports);
      if (!(await waitFor(() => clusterHealthy(ports), 30_000, 200))) {
        throw new Error(`cluster on ${nodesLine(ports)} did not reach cluster_state:ok within 30s`);
      }
      writeFileSync(path.join(dir, "nodes"), `${nodesLine(ports)}\n`);
      return ports;
    } catch (error) {
      lastError = error;
      log(`attempt ${attempt} failed: ${error.message}`);
      for (const port of ports) await stopNode(dir, port).catch(() => {});
      for (const name of readdirSync(dir)) rmSync(path.join(dir, name), { recursive: true, force: true });
    }
  }
  rmSync(dir, { recursive: true, force: true });
  throw lastError;
}

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
  if (action === "start") {
    const ports = await start(dir);
    process.stdout.write(`REDIS_CLUSTER_NODES=${nodesLine(ports)}\n`);
  } else {
    await stop(dir);
  }
}

main().catch((error) => {
  if (error instanceof UsageError) {
    process.stderr.write(
      `redis-cluster: ${error.message}\nusage: node scripts/redis-cluster.mjs <start|stop> --dir <dir>\n`,
    );
    process.exit(2);
  }
  process.stderr.write(`redis-cluster: ${error.message}\n`);
  process.exit(1);
});
