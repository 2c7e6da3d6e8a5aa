// A throwaway three-master Redis Cluster for the tests, with a replica per master if asked (the failover
// tests SIGKILL a master and its replica takes over): its nodes are daemonized redis-servers in one
// directory, so that a later process (CI's cleanup, the next test run's reaper) can stop exactly them.
// The directory holds a state file naming the ports and the nodes' settings and, per node, `<port>.pid`,
// `<port>.log` and `nodes-<port>.conf`.

import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { MissingRedisServerError } from "./errors.js";
import { freePort, portIsFree } from "./free-port.js";
import { pollUntil } from "./poll-until.js";
import { isRedisServerProcess, processAlive } from "./process-alive.js";
import { redisCommand } from "./redis-command.js";
import { infoField, replicaInSync } from "./redis-info.js";
import { redisServerBin, startRedisServer } from "./redis-server.js";

const HOST = "127.0.0.1";
const MASTER_COUNT = 3;
const STATE_FILE = ".redis-cluster.json";
const STATE_KIND = "once-redis-cluster";

export interface RedisClusterOptions {
  /** Where progress goes (default: nowhere). */
  log?: (message: string) => void;
  /** Replicas of each of the three masters (default 0). */
  replicasPerMaster?: number;
  /**
   * cluster-node-timeout: how long a node may be silent before the others deem it failed, and so how soon
   * a master's replica takes over. Default 5000 ms.
   */
  nodeTimeoutMs?: number;
  /** Every node's AOF (default off), fsync `everysec`. */
  appendonly?: boolean;
  /**
   * Where a node says it is (`cluster-announce-port`), given its own port: its replicas and the clients
   * (through CLUSTER SLOTS and redirections) reach it there, the cluster bus stays on its own port + 10000.
   * A caller's proxy in front of the node can so hold back or cut its replication. Default: its own port.
   */
  announcePort?: (port: number) => number | Promise<number>;
}

/** How every node of a cluster is started: kept in its state file, so that a node restarts the same. */
type NodeSettings = Required<
  Pick<RedisClusterOptions, "replicasPerMaster" | "nodeTimeoutMs" | "appendonly">
> & {
  /** Node port → the port it announces, for the nodes that announce another one. */
  announced?: Record<string, number>;
};

export interface RedisCluster {
  /** Every node's port; the first three are the first masters. */
  ports: number[];
  /** `127.0.0.1:P1,127.0.0.1:P2,…`, every node: the value of REDIS_CLUSTER_NODES. */
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
  /** Absent in a state file written before replicas were an option: no replicas, the old defaults. */
  settings?: NodeSettings;
}

function settingsOf(options: RedisClusterOptions): NodeSettings {
  return {
    replicasPerMaster: options.replicasPerMaster ?? 0,
    nodeTimeoutMs: options.nodeTimeoutMs ?? 5_000,
    appendonly: options.appendonly ?? false,
  };
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

function writeState(dir: string, ports: number[], settings: NodeSettings): void {
  const state = { kind: STATE_KIND, host: HOST, ports, settings, startedAt: new Date().toISOString() };
  writeFileSync(path.join(dir, STATE_FILE), `${JSON.stringify(state, null, 2)}\n`);
}

function nodesLine(ports: readonly number[]): string {
  return ports.map((port) => `${HOST}:${port}`).join(",");
}

/** Every node answers, serves all slots with three masters, knows all the others; each replica is in sync. */
async function clusterHealthy(ports: readonly number[]): Promise<boolean> {
  for (const port of ports) {
    try {
      const info = await redisCommand(HOST, port, ["CLUSTER", "INFO"]);
      if (infoField(info, "cluster_state") !== "ok") return false;
      if (infoField(info, "cluster_slots_assigned") !== "16384") return false;
      if (Number(infoField(info, "cluster_size")) !== MASTER_COUNT) return false;
      if (Number(infoField(info, "cluster_known_nodes")) !== ports.length) return false;
      const replication = await redisCommand(HOST, port, ["INFO", "replication"]);
      if (infoField(replication, "role") === "slave" && !(await replicaInSync(port))) return false;
    } catch {
      return false;
    }
  }
  return true;
}

function startNode(dir: string, port: number, settings: NodeSettings): Promise<unknown> {
  const announce = settings.announced?.[port];
  return startRedisServer({
    port,
    dir,
    detached: true,
    pidFile: path.join(dir, `${port}.pid`),
    logFile: path.join(dir, `${port}.log`),
    appendonly: settings.appendonly,
    extraArgs: [
      "--cluster-enabled",
      "yes",
      "--cluster-config-file",
      path.join(dir, `nodes-${port}.conf`),
      "--cluster-node-timeout",
      String(settings.nodeTimeoutMs),
      // A node's AOF is named after its port: the nodes share one directory.
      "--appenddirname",
      `appendonlydir-${port}`,
      // A replica's full sync starts at once, not after the 5 s Redis waits for more replicas to join it.
      "--repl-diskless-sync-delay",
      "0",
      ...(announce === undefined
        ? []
        : [
            "--cluster-announce-ip",
            HOST,
            "--cluster-announce-port",
            String(announce),
            "--cluster-announce-bus-port",
            String(port + 10000),
          ]),
    ],
  });
}

function runClusterCreate(ports: readonly number[], replicasPerMaster: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const args = [
      "--cluster",
      "create",
      ...ports.map((port) => `${HOST}:${port}`),
      "--cluster-replicas",
      String(replicasPerMaster),
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
 * Starts three masters (and `replicasPerMaster` replicas of each) on free ports in `dir` (an empty or
 * missing directory) and joins them into a cluster with redis-cli. Started again on a directory whose
 * cluster still runs, it returns that cluster.
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
  const settings = settingsOf(options);
  const nodeCount = MASTER_COUNT * (1 + settings.replicasPerMaster);

  let lastError: unknown;
  const tried = new Set<number>();
  for (let attempt = 1; attempt <= 3; attempt++) {
    const ports = await pickPorts(nodeCount, tried);
    for (const port of ports) tried.add(port);
    if (options.announcePort) {
      settings.announced = {};
      for (const port of ports) settings.announced[port] = await options.announcePort(port);
    }
    writeState(dir, ports, settings);
    try {
      for (const port of ports) await startNode(dir, port, settings);
      await runClusterCreate(ports, settings.replicasPerMaster);
      if (!(await pollUntil(() => clusterHealthy(ports), { timeoutMs: 30_000, intervalMs: 200 }))) {
        throw new Error(`cluster on ${nodesLine(ports)} did not reach cluster_state:ok in sync within 30s`);
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

/** One line of CLUSTER NODES: a node's port, its flags, and whether it serves slots. */
interface ClusterNodeView {
  port: number;
  flags: string[];
  servesSlots: boolean;
}

function parseClusterNodes(reply: string | null): ClusterNodeView[] {
  return (reply ?? "")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => {
      const fields = line.trim().split(" ");
      // <id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> <slot>…
      const port = Number(/:(\d+)@/.exec(fields[1] ?? "")?.[1]);
      return { port, flags: (fields[2] ?? "").split(","), servesSlots: fields.length > 8 };
    });
}

/** The node port behind a port the cluster names (its announced one, or its own). */
function nodePortOf(state: ClusterState | undefined, named: number): number {
  const found = Object.entries(state?.settings?.announced ?? {}).find(([, announced]) => announced === named);
  return found === undefined ? named : Number(found[0]);
}

/** The nodes of `dir`'s cluster whose process runs now. */
function runningPorts(dir: string): number[] {
  return recordedPorts(dir).filter((port) => {
    const pid = readPid(dir, port);
    return pid !== undefined && processAlive(pid);
  });
}

/**
 * The masters serving slots now (their own ports, whatever they announce), as every running node of
 * `dir`'s cluster sees them: undefined while they disagree, or while the cluster is not `ok` everywhere (a
 * failover under way).
 */
export async function clusterMasters(dir: string): Promise<number[] | undefined> {
  const state = readState(dir);
  let agreed: string | undefined;
  for (const port of runningPorts(dir)) {
    try {
      const info = await redisCommand(HOST, port, ["CLUSTER", "INFO"]);
      if (infoField(info, "cluster_state") !== "ok") return undefined;
      const masters = parseClusterNodes(await redisCommand(HOST, port, ["CLUSTER", "NODES"]))
        .filter((node) => node.flags.includes("master") && !node.flags.includes("fail") && node.servesSlots)
        .map((node) => nodePortOf(state, node.port))
        .sort((a, b) => a - b);
      const seen = masters.join(",");
      if (agreed !== undefined && seen !== agreed) return undefined;
      agreed = seen;
    } catch {
      return undefined;
    }
  }
  return agreed === undefined ? undefined : agreed.split(",").map(Number);
}

/** SIGKILLs the node on `port` of `dir`'s cluster (only the process recorded there) and waits until it is gone. */
export async function killClusterNode(dir: string, port: number): Promise<void> {
  const pid = readPid(dir, port);
  if (pid === undefined || !processAlive(pid) || !isRedisServerProcess(pid, port)) {
    throw new Error(`no redis-server of ${dir} runs on port ${port}`);
  }
  process.kill(pid, "SIGKILL");
  if (!(await pollUntil(() => !processAlive(pid), { timeoutMs: 10_000, intervalMs: 20 }))) {
    throw new Error(`redis-server pid ${pid} (port ${port}) outlived SIGKILL by 10 s`);
  }
}

/**
 * Resolves with the masters once the running nodes agree on three that serve every slot, none of them
 * `killed`, and the cluster is `ok` again; throws after `timeoutMs` (default 30 s).
 */
export async function awaitClusterFailover(
  dir: string,
  killed: number,
  options: { timeoutMs?: number } = {},
): Promise<number[]> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  let masters: number[] | undefined;
  const done = await pollUntil(
    async () => {
      masters = await clusterMasters(dir);
      return masters !== undefined && masters.length === MASTER_COUNT && !masters.includes(killed);
    },
    { timeoutMs, intervalMs: 50 },
  );
  if (!done || !masters)
    throw new Error(`no replica took over from ${HOST}:${killed} within ${timeoutMs} ms`);
  return masters;
}

/**
 * Starts a killed node of `dir`'s cluster again, with its cluster config: it rejoins, finds its slots
 * taken by the replica that was promoted, and becomes that one's replica. Resolves once the whole cluster
 * is healthy (every replica in sync) again; throws after 30 s.
 */
export async function restartClusterNode(dir: string, port: number): Promise<void> {
  const state = readState(dir);
  if (!state?.ports.includes(port)) throw new Error(`port ${port} is not a node of the cluster in ${dir}`);
  await startNode(dir, port, state.settings ?? settingsOf({}));
  // Until it has heard from the others it still takes itself for the master of its old slots.
  const rejoined = async () => (await replicaInSync(port)) && (await clusterHealthy(state.ports));
  if (!(await pollUntil(rejoined, { timeoutMs: 30_000, intervalMs: 100 }))) {
    throw new Error(`the cluster in ${dir} was not healthy within 30 s of restarting ${HOST}:${port}`);
  }
}
