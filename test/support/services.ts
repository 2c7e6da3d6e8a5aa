// Test helpers for the Redis services the suites need: the shared standalone Redis (REDIS_URL), the Redis
// Cluster started by test/support/global-setup.ts (REDIS_CLUSTER_NODES), throwaway redis-server processes
// that tests own (to kill, restart and replay AOF), unique key prefixes, and prefix cleanup.
//
// No dependency beyond Node: the client types below are structural, so a `Redis` or `Cluster` from
// ioredis 6 fits them without this file importing ioredis.

import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
// Type-only (erased at runtime): makes "vitest" resolvable for the ProvidedContext augmentation below.
import type {} from "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    /** Set by test/support/global-setup.ts: the same value as REDIS_CLUSTER_NODES. */
    redisClusterNodes: string;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Where the services are.

/** The shared standalone Redis every suite may use: `REDIS_URL`, else `redis://127.0.0.1:6379`. */
export function redisUrl(): string {
  return process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
}

/** Host and port of a Redis node, in the shape ioredis' `new Cluster(nodes)` accepts. */
export interface RedisNodeAddress {
  host: string;
  port: number;
}

/** Parses `host:port,host:port,…` (IPv6 hosts in brackets, e.g. `[::1]:7000`). */
export function parseNodeList(value: string): RedisNodeAddress[] {
  const nodes: RedisNodeAddress[] = [];
  for (const raw of value.split(",")) {
    const entry = raw.trim();
    if (entry === "") continue;
    const colon = entry.lastIndexOf(":");
    const host = entry.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
    const port = Number(entry.slice(colon + 1));
    if (colon <= 0 || host === "" || !Number.isInteger(port) || port <= 0 || port > 65535) {
      throw new Error(`invalid Redis node address ${JSON.stringify(entry)} in ${JSON.stringify(value)}`);
    }
    nodes.push({ host, port });
  }
  if (nodes.length === 0) throw new Error(`no Redis node addresses in ${JSON.stringify(value)}`);
  return nodes;
}

/**
 * The Redis Cluster's seed nodes, from `REDIS_CLUSTER_NODES` (`127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`).
 * test/support/global-setup.ts sets it (starting a cluster) unless it is already set.
 */
export function clusterNodes(): RedisNodeAddress[] {
  const value = process.env.REDIS_CLUSTER_NODES;
  if (value === undefined || value.trim() === "") {
    throw new Error(
      "REDIS_CLUSTER_NODES is not set. Add the shared global setup to this package's vitest config " +
        '(packageTestConfig({ globalSetup: ["../../test/support/global-setup.ts"] })), or start a cluster ' +
        "yourself: `node scripts/redis-cluster.mjs start --dir .cluster` and export the line it prints.",
    );
  }
  return parseNodeList(value);
}

// ---------------------------------------------------------------------------------------------------------
// Unique names.

function hex(bytes: number): string {
  return randomBytes(bytes).toString("hex");
}

function sanitizeLabel(label: string): string {
  const clean = label.replace(/[^A-Za-z0-9_.-]+/g, "-").slice(0, 24);
  return clean === "" ? "t" : clean;
}

/**
 * A unique key prefix for one test, e.g. `once-test:dedup:3f9a0c12:`. It carries no hash tag, so keys
 * under it still spread over a cluster's slots (and `{…}` in the label is replaced).
 */
export function randomPrefix(label: string): string {
  return `once-test:${sanitizeLabel(label)}:${hex(4)}:`;
}

/**
 * A unique BullMQ queue prefix for a Redis Cluster, e.g. `{bull-dedup-3f9a0c12}`: BullMQ's keys for one
 * queue must share a slot, which the hash tag guarantees (without it: CROSSSLOT errors).
 */
export function clusterQueuePrefix(label: string): string {
  return `{bull-${sanitizeLabel(label)}-${hex(4)}}`;
}

/** A TCP port that was free on 127.0.0.1 a moment ago (the kernel's pick for port 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port: 0, exclusive: true }, () => {
      const address = server.address();
      server.close(() => {
        if (typeof address === "object" && address !== null) resolve(address.port);
        else reject(new Error("could not read the port the kernel picked"));
      });
    });
  });
}

// ---------------------------------------------------------------------------------------------------------
// A minimal RESP client (one command per connection) for readiness checks and SHUTDOWN.

/** Sends one command to host:port and resolves with its first reply line (`+PONG` → `PONG`). */
export function rawCommand(
  host: string,
  port: number,
  args: readonly string[],
  options: { timeoutMs?: number; password?: string; username?: string } = {},
): Promise<string> {
  const timeoutMs = options.timeoutMs ?? 2000;
  const commands: string[][] = [];
  if (options.password !== undefined) {
    commands.push(
      options.username ? ["AUTH", options.username, options.password] : ["AUTH", options.password],
    );
  }
  commands.push([...args]);
  const encoded = commands
    .map(
      (command) =>
        `*${command.length}\r\n${command.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join("")}`,
    )
    .join("");
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ host, port });
    let buffered = "";
    let settled = false;
    const finish = (error: Error | null, value?: string) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (error) reject(error);
      else resolve(value ?? "");
    };
    socket.setTimeout(timeoutMs, () =>
      finish(new Error(`no reply from ${host}:${port} within ${timeoutMs}ms`)),
    );
    socket.on("connect", () => socket.write(encoded));
    socket.on("data", (chunk) => {
      buffered += chunk.toString("utf8");
      const lines = buffered.split("\r\n");
      // Wait for one complete reply line per command sent (bulk replies are not needed here).
      if (lines.length - 1 < commands.length) return;
      for (const line of lines.slice(0, commands.length)) {
        if (line.startsWith("-")) return finish(new Error(`${host}:${port} replied ${line.slice(1)}`));
      }
      finish(null, (lines[commands.length - 1] ?? "").replace(/^[+:$]/, ""));
    });
    socket.on("error", (error) => finish(error));
    socket.on("close", () => finish(new Error(`${host}:${port} closed the connection`)));
  });
}

/** Resolves true when a Redis answers PING at host:port (within `timeoutMs` for the one attempt). */
export async function pingRedis(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  try {
    return (await rawCommand(host, port, ["PING"], { timeoutMs })) === "PONG";
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------------------
// Throwaway redis-server processes that tests own.

export interface RedisServerOptions {
  /** Turns on the AOF (default false). */
  appendonly?: boolean;
  /** AOF fsync policy (default `everysec`, Redis' own default). */
  appendfsync?: "always" | "everysec" | "no";
  /** A fixed port; default: a free one. */
  port?: number;
  /** More redis-server arguments, e.g. `["--maxmemory", "10mb"]`. */
  extraArgs?: string[];
}

export interface RedisServerHandle {
  readonly port: number;
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  /** Its working directory (AOF lives here); removed by `stop()`. */
  readonly dir: string;
  /** The current process id (it changes on `restart()`); 0 once stopped. */
  readonly pid: number;
  /** Whether the process is running. */
  readonly running: boolean;
  /** SHUTDOWN NOSAVE (SIGKILL if it does not exit), waits for the exit, removes `dir`. Idempotent. */
  stop(): Promise<void>;
  /** Sends `signal` (default SIGKILL) and waits for the exit; keeps `dir` so `restart()` replays the AOF. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Stops it if running (gracefully), then starts it again on the same port with the same dir. */
  restart(): Promise<void>;
}

function redisServerBin(): string {
  return process.env.REDIS_SERVER_BIN || "redis-server";
}

const HOST = "127.0.0.1";
const READY_TIMEOUT_MS = 10_000;
const servers = new Set<RedisServer>();
let exitHookInstalled = false;

/**
 * Names the environment variable holding the directory where startRedisServer() records its processes, so
 * the global teardown can reap servers a crashed worker left behind. global-setup.ts sets it inside the
 * vitest process (it never passes through turbo, hence not in turbo.json's globalEnv).
 */
export const REGISTRY_ENV = "ONCE_TEST_REDIS_REGISTRY";

function registryFile(pid: number): string | undefined {
  const dir = process.env[REGISTRY_ENV];
  return dir ? path.join(dir, `${pid}.json`) : undefined;
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Last resort when a test file forgets stopAllRedisServers(): synchronous kill and cleanup at exit.
  process.once("exit", () => {
    for (const server of servers) server.killSync();
  });
}

function tail(file: string, lines = 12): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

class RedisServer implements RedisServerHandle {
  readonly url: string;
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private removed = false;

  constructor(
    readonly port: number,
    readonly dir: string,
    private readonly args: readonly string[],
  ) {
    this.url = `redis://${HOST}:${port}`;
  }

  get pid(): number {
    return this.running ? (this.child?.pid ?? 0) : 0;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  get logFile(): string {
    return path.join(this.dir, "redis.log");
  }

  /** Spawns the process and waits for PING; throws (after cleaning up the process) if it never answers. */
  async spawn(): Promise<void> {
    if (this.removed) throw new Error(`redis-server on port ${this.port} was stopped; its dir is gone`);
    if (this.running) throw new Error(`redis-server on port ${this.port} is already running`);
    const child = spawn(redisServerBin(), [...this.args], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString("utf8")).slice(-4000);
    });
    let spawnError: Error | undefined;
    this.exited = new Promise((resolve) => {
      child.once("exit", () => resolve());
      child.once("error", (error: NodeJS.ErrnoException) => {
        spawnError =
          error.code === "ENOENT"
            ? new Error(
                `cannot run ${redisServerBin()}: not found. Install Redis (apt-get install -y redis-server) ` +
                  "or set REDIS_SERVER_BIN.",
              )
            : error;
        resolve();
      });
    });
    this.child = child;
    servers.add(this);
    installExitHook();

    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (spawnError) break;
      if (child.exitCode !== null || child.signalCode !== null) break;
      if (await pingRedis(HOST, this.port, 300)) {
        this.register();
        return;
      }
      await sleep(50);
    }
    const exitedEarly = child.exitCode !== null || child.signalCode !== null;
    if (!exitedEarly && !spawnError) {
      child.kill("SIGKILL");
      await this.exited;
    }
    if (spawnError) throw spawnError;
    throw new Error(
      `redis-server on port ${this.port} ${
        exitedEarly ? `exited (${child.signalCode ?? child.exitCode})` : "did not answer PING within 10s"
      }; log:\n${tail(this.logFile)}${stderr ? `\nstderr:\n${stderr.trim()}` : ""}`,
    );
  }

  private register(): void {
    const pid = this.child?.pid;
    const file = pid ? registryFile(pid) : undefined;
    if (!file || !pid) return;
    try {
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, JSON.stringify({ pid, port: this.port, dir: this.dir }));
    } catch {
      // Best effort: the registry only helps the global teardown reap leftovers.
    }
  }

  private unregister(pid: number | undefined): void {
    const file = pid ? registryFile(pid) : undefined;
    if (file) rmSync(file, { force: true });
  }

  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    child.kill(signal);
    const timedOut = await Promise.race([this.exited.then(() => false), sleep(15_000).then(() => true)]);
    if (timedOut) {
      child.kill("SIGKILL");
      await this.exited;
    }
    this.unregister(child.pid);
  }

  /** Graceful stop that keeps the dir: SHUTDOWN NOSAVE (the AOF is still flushed), SIGKILL after 10s. */
  private async shutdown(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    try {
      await rawCommand(HOST, this.port, ["SHUTDOWN", "NOSAVE"], { timeoutMs: 5000 });
    } catch {
      // Redis closes the connection without a reply when it shuts down.
    }
    const timedOut = await Promise.race([this.exited.then(() => false), sleep(10_000).then(() => true)]);
    if (timedOut) {
      child.kill("SIGKILL");
      await this.exited;
    }
    this.unregister(child.pid);
  }

  async stop(): Promise<void> {
    await this.shutdown();
    servers.delete(this);
    if (!this.removed) {
      this.removed = true;
      rmSync(this.dir, { recursive: true, force: true });
    }
  }

  async restart(): Promise<void> {
    await this.shutdown();
    await this.spawn();
  }

  /** Synchronous kill and cleanup for the process exit hook. */
  killSync(): void {
    if (this.running) this.child?.kill("SIGKILL");
    this.unregister(this.child?.pid);
    if (!this.removed) {
      this.removed = true;
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}

/**
 * Starts a redis-server child process this test owns (not daemonized, `--save ""`, noeviction, AOF per
 * options) in a fresh temp dir and waits until it answers PING. Stop it with `handle.stop()` or
 * `stopAllRedisServers()` in `afterAll`; leftovers are killed at process exit and by the global teardown.
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServerHandle> {
  const attempts = options.port === undefined ? 3 : 1;
  let lastError: unknown;
  for (let attempt = 0; attempt < attempts; attempt++) {
    const port = options.port ?? (await freePort());
    const dir = mkdtempSync(path.join(os.tmpdir(), "once-redis-"));
    const args = [
      "--port",
      String(port),
      "--bind",
      HOST,
      "--dir",
      dir,
      "--save",
      "",
      "--appendonly",
      options.appendonly ? "yes" : "no",
      "--appendfsync",
      options.appendfsync ?? "everysec",
      "--maxmemory-policy",
      "noeviction",
      "--daemonize",
      "no",
      "--logfile",
      path.join(dir, "redis.log"),
      ...(options.extraArgs ?? []),
    ];
    const server = new RedisServer(port, dir, args);
    try {
      await server.spawn();
      return server;
    } catch (error) {
      lastError = error;
      await server.stop();
      // A port someone grabbed between freePort() and the bind: try another one.
      if (!String(error).includes("Address already in use")) break;
    }
  }
  throw lastError;
}

/** Stops every server startRedisServer() started in this process. */
export async function stopAllRedisServers(): Promise<void> {
  await Promise.all([...servers].map((server) => server.stop()));
}

// ---------------------------------------------------------------------------------------------------------
// Cleanup.

/** What cleanupPrefix needs from a client: ioredis' `Redis` fits. */
export interface ScanDelClient {
  scan(
    cursor: number | string,
    matchToken: "MATCH",
    pattern: string,
    countToken: "COUNT",
    count: number | string,
  ): Promise<[cursor: string, elements: string[]]>;
  del(...keys: string[]): Promise<number>;
}

/** What cleanupPrefix needs from a cluster client: ioredis' `Cluster` fits. */
export interface ClusterScanDelClient {
  readonly isCluster: boolean;
  nodes(role?: "master" | "slave" | "all"): ScanDelClient[];
}

function isClusterClient(client: ScanDelClient | ClusterScanDelClient): client is ClusterScanDelClient {
  return "nodes" in client && typeof client.nodes === "function" && client.isCluster === true;
}

/** Escapes glob metacharacters so SCAN MATCH takes the prefix literally (hash tags contain none). */
function escapeGlob(value: string): string {
  return value.replace(/[*?[\]\\]/g, "\\$&");
}

/**
 * Deletes every key starting with `prefix` (SCAN MATCH prefix*, then DEL). On a cluster client it scans
 * every master and deletes key by key, so keys in different slots never meet in one DEL. Returns the
 * number of keys deleted.
 */
export async function cleanupPrefix(
  client: ScanDelClient | ClusterScanDelClient,
  prefix: string,
): Promise<number> {
  if (prefix === "") throw new Error("cleanupPrefix: refusing an empty prefix (it would delete every key)");
  const pattern = `${escapeGlob(prefix)}*`;
  if (isClusterClient(client)) {
    let deleted = 0;
    for (const node of client.nodes("master")) deleted += await scanAndDelete(node, pattern, true);
    return deleted;
  }
  return scanAndDelete(client, pattern, false);
}

async function scanAndDelete(client: ScanDelClient, pattern: string, oneKeyPerDel: boolean): Promise<number> {
  let cursor = "0";
  let deleted = 0;
  do {
    const [next, keys] = await client.scan(cursor, "MATCH", pattern, "COUNT", 500);
    cursor = next;
    if (keys.length === 0) continue;
    if (oneKeyPerDel) {
      const counts = await Promise.all(keys.map((key) => client.del(key)));
      deleted += counts.reduce((sum, n) => sum + n, 0);
    } else {
      deleted += await client.del(...keys);
    }
  } while (cursor !== "0");
  return deleted;
}
