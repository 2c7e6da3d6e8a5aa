// A throwaway three-master Redis Cluster for the tests: its nodes are daemonized redis-servers in one
// directory, so that a later process (CI's cleanup, the next test run's reaper) can stop exactly them.
// The directory holds a state file naming the ports and, per node, `<port>.pid`, `<port>.log` and
// `nodes-<port>.conf`.

import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { MissingRedisServerError } from "./errors.js";
import { freePort, portIsFree } from "./free-port.js";
import { pollUntil } from "./poll-until.js";
import { isRedisServerProcess, processAlive } from "./process-alive.js";
import { redisCommand } from "./redis-command.js";
import { redisServerBin, startRedisServer } from "./redis-server.js";

const HOST = "127.0.0.1";
const NODE_COUNT = 3;
const STATE_FILE = ".redis-cluster.json";
const STATE_KIND = "once-redis-cluster";

export interface RedisClusterOptions {
  /** Where progress goes (default: nowhere). */
  log?: (message: string) => void;
}

export interface RedisCluster {
  ports: number[];
  /** `127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`: the value of REDIS_CLUSTER_NODES. */
  nodes: string;
}

function redisCliBin(): string {
  const server = process.env.REDIS_SERVER_BIN;
  if (server?.includes("/")) {
    const sibling = path.join(path.dirname(server), "redis-cli");
    if (existsSync(sibling)) return sibling;
  }
  return "redis-cli";
}

/** The binary's `--version` line; throws a clear error when it cannot be run. */
function requireBinary(bin: string, envName: string): string {
  const result = spawnSync(bin, ["--version"], { encoding: "utf8" });
  if (result.error) {
    if (bin === redisServerBin()) throw new MissingRedisServerError(bin, { cause: result.error });
    throw new Error(
      `cannot run \`${bin}\` (${(result.error as NodeJS.ErrnoException).code ?? result.error.message}): ` +
        `install Redis (Debian/Ubuntu: \`apt-get install -y redis-server\`, macOS: \`brew install redis\`) or set ${envName} to its path`,
    );
  }
  return result.stdout.trim();
}

function infoField(info: string | null, field: string): string | undefined {
  const match = new RegExp(`^${field}:(.*)$`, "m").exec(info ?? "");
  return match?.[1]?.trim();
}

/** Picks `count` distinct free ports whose cluster bus ports (port + 10000) are free too. */
async function pickPorts(count: number, avoid: ReadonlySet<number>): Promise<number[]> {
  const ports: number[] = [];
  for (let attempt = 0; ports.length < count && attempt < 500; attempt++) {
    const port = await freePort(HOST);
    if (port <= 0 || port + 10000 > 65535) continue;
    if (avoid.has(port) || ports.some((taken) => Math.abs(taken - port) === 10000 || taken === port))
      continue;
    if (await portIsFree(port + 10000, HOST)) ports.push(port);
  }
  if (ports.length < count)
    throw new Error("could not find free ports (with free bus ports at port + 10000)");
  return ports;
}

function readPid(dir: string, port: number): number | undefined {
  try {
    const pid = Number(readFileSync(path.join(dir, `${port}.pid`), "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

interface ClusterState {
  kind: string;
  ports: number[];
}

function readState(dir: string): ClusterState | undefined {
  try {
    const state = JSON.parse(readFileSync(path.join(dir, STATE_FILE), "utf8")) as Partial<ClusterState>;
    return state && state.kind === STATE_KIND && Array.isArray(state.ports)
      ? (state as ClusterState)
      : undefined;
  } catch {
    return undefined;
  }
}

function writeState(dir: string, ports: number[]): void {
  const state = { kind: STATE_KIND, host: HOST, ports, startedAt: new Date().toISOString() };
  writeFileSync(path.join(dir, STATE_FILE), `${JSON.stringify(state, null, 2)}\n`);
}

function nodesLine(ports: readonly number[]): string {
  return ports.map((port) => `${HOST}:${port}`).join(",");
}

async function clusterHealthy(ports: readonly number[]): Promise<boolean> {
  for (const port of ports) {
    try {
      const info = await redisCommand(HOST, port, ["CLUSTER", "INFO"]);
      if (infoField(info, "cluster_state") !== "ok") return false;
      if (infoField(info, "cluster_slots_assigned") !== "16384") return false;
      if (Number(infoField(info, "cluster_known_nodes")) !== ports.length) return false;
    } catch {
      return false;
    }
  }
  return true;
}

function startNode(dir: string, port: number): Promise<unknown> {
  return startRedisServer({
    port,
    dir,
    detached: true,
    pidFile: path.join(dir, `${port}.pid`),
    logFile: path.join(dir, `${port}.log`),
    extraArgs: [
      "--cluster-enabled",
      "yes",
      "--cluster-config-file",
      path.join(dir, `nodes-${port}.conf`),
      "--cluster-node-timeout",
      "5000",
    ],
  });
}

function runClusterCreate(ports: readonly number[]): Promise<string> {
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
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk;
    });
    child.stderr.on("data", (chunk: Buffer) => {
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

/** Stops the node on `port` recorded in `dir`, only if it is still the process recorded there. */
async function stopNode(dir: string, port: number, log: (message: string) => void): Promise<boolean> {
  const pid = readPid(dir, port);
  let served = false;
  try {
    const info = await redisCommand(HOST, port, ["INFO", "server"]);
    served = pid !== undefined && Number(infoField(info, "process_id")) === pid;
  } catch {
    served = false;
  }
  if (served) {
    try {
      await redisCommand(HOST, port, ["SHUTDOWN", "NOSAVE"]);
    } catch {
      // The server closes the connection without replying when it shuts down.
    }
  } else if (pid !== undefined && processAlive(pid) && isRedisServerProcess(pid, port)) {
    process.kill(pid, "SIGTERM");
  } else {
    return false;
  }
  if (
    pid !== undefined &&
    !(await pollUntil(() => !processAlive(pid), { timeoutMs: 10_000, intervalMs: 100 }))
  ) {
    log(`redis-server pid ${pid} (port ${port}) ignored SHUTDOWN/SIGTERM; sending SIGKILL`);
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
    await pollUntil(() => !processAlive(pid), { timeoutMs: 5_000, intervalMs: 100 });
  }
  return true;
}

/** Ports recorded in `dir`: from the state file, else from pid files. */
function recordedPorts(dir: string): number[] {
  const state = readState(dir);
  if (state) return state.ports;
  try {
    return readdirSync(dir)
      .map((name) => /^(\d+)\.pid$/.exec(name)?.[1])
      .filter((port): port is string => port !== undefined)
      .map(Number);
  } catch {
    return [];
  }
}

/**
 * Stops exactly the nodes started in `dir`, then removes it; a missing `dir` is nothing to stop. Refuses a
 * directory this module did not make.
 */
export async function stopRedisCluster(dir: string, options: RedisClusterOptions = {}): Promise<void> {
  const log = options.log ?? (() => {});
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
    const stopped = await stopNode(dir, port, log);
    log(stopped ? `stopped node ${HOST}:${port}` : `node ${HOST}:${port} was not running`);
  }
  rmSync(dir, { recursive: true, force: true });
  log(`removed ${dir}`);
}

/**
 * Starts three masters on free ports in `dir` (an empty or missing directory) and joins them into a
 * cluster with redis-cli. Started again on a directory whose cluster still runs, it returns that cluster.
 */
export async function startRedisCluster(
  dir: string,
  options: RedisClusterOptions = {},
): Promise<RedisCluster> {
  const log = options.log ?? (() => {});
  const serverVersion = requireBinary(redisServerBin(), "REDIS_SERVER_BIN");
  requireBinary(redisCliBin(), "REDIS_SERVER_BIN (redis-cli is looked up next to it)");

  const previous = readState(dir);
  if (previous) {
    if (await clusterHealthy(previous.ports)) {
      log(`a cluster started in ${dir} is already running`);
      return { ports: previous.ports, nodes: nodesLine(previous.ports) };
    }
    log(`a previous cluster in ${dir} is not healthy; stopping what is left of it`);
    await stopRedisCluster(dir, options);
  } else if (existsSync(dir) && readdirSync(dir).length > 0) {
    throw new Error(`${dir} exists and is not empty; give start an empty or missing directory`);
  }
  mkdirSync(dir, { recursive: true });
  log(serverVersion);

  let lastError: unknown;
  const tried = new Set<number>();
  for (let attempt = 1; attempt <= 3; attempt++) {
    const ports = await pickPorts(NODE_COUNT, tried);
    for (const port of ports) tried.add(port);
    writeState(dir, ports);
    try {
      for (const port of ports) await startNode(dir, port);
      await runClusterCreate(ports);
      if (!(await pollUntil(() => clusterHealthy(ports), { timeoutMs: 30_000, intervalMs: 200 }))) {
        throw new Error(`cluster on ${nodesLine(ports)} did not reach cluster_state:ok within 30s`);
      }
      writeFileSync(path.join(dir, "nodes"), `${nodesLine(ports)}\n`);
      return { ports, nodes: nodesLine(ports) };
    } catch (error) {
      lastError = error;
      log(`attempt ${attempt} failed: ${error instanceof Error ? error.message : String(error)}`);
      for (const port of ports) await stopNode(dir, port, log).catch(() => {});
      for (const name of readdirSync(dir)) rmSync(path.join(dir, name), { recursive: true, force: true });
    }
  }
  rmSync(dir, { recursive: true, force: true });
  throw lastError;
}
