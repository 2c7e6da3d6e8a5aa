// Throwaway redis-server processes: the one way this repository's tests and tools launch one, be it a
// child of the test (killed, restarted, its AOF replayed), the demo's or the bench's own server, a node of
// the test Redis Cluster or CI's Redis (both daemonized, so that they outlive the process that started them).

import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { MissingRedisServerError } from "./errors.js";
import { freePort } from "./free-port.js";
import { waitForRedis } from "./ping-redis.js";
import { pollUntil } from "./poll-until.js";
import { processAlive } from "./process-alive.js";
import { redisCommand } from "./redis-command.js";

export interface RedisServerOptions {
  /** A fixed port; default a free one (up to three are tried, should another process bind one first). */
  port?: number;
  /** Turns on the AOF (default false). */
  appendonly?: boolean;
  /** AOF fsync policy (default `everysec`, Redis' own default). */
  appendfsync?: "always" | "everysec" | "no";
  /** More redis-server arguments, e.g. `["--maxmemory", "10mb"]`. */
  extraArgs?: readonly string[];
  /**
   * A config file, given as the first argument (the others override it). A Sentinel needs one: it writes
   * what it learns (replicas, other Sentinels, failovers) back into it.
   */
  configFile?: string;
  /** The binary; default `REDIS_SERVER_BIN`, else `redis-server` on PATH. */
  bin?: string;
  /** Its working directory (AOF, log); default a fresh temp dir, which `stop()` removes. A given one stays. */
  dir?: string;
  /** Default `<dir>/redis.log`. */
  logFile?: string;
  /**
   * Daemonized (`--daemonize yes`): it outlives this process, which neither kills it at exit nor records
   * it for the test teardown. For CI's Redis and the nodes of a cluster; `pid` is read from `pidFile`.
   */
  detached?: boolean;
  /** With `detached`: where it writes its pid (default `<dir>/redis.pid`). */
  pidFile?: string;
}

export interface RedisServerHandle {
  readonly port: number;
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  /** Its working directory (AOF lives here). */
  readonly dir: string;
  /** The current process id (it changes on `restart()`); 0 once stopped. */
  readonly pid: number;
  /** Whether the process is running. */
  readonly running: boolean;
  /** SHUTDOWN NOSAVE (SIGKILL if it does not exit), waits for the exit, removes a dir it made. Idempotent. */
  stop(): Promise<void>;
  /** Sends `signal` (default SIGKILL) and waits for the exit; keeps `dir` so `restart()` replays the AOF. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /**
   * Stops it if running (gracefully), then starts it again on the same port with the same dir; `extraArgs`
   * are added after its own for this start only (e.g. `--replicaof` the primary a failover promoted).
   */
  restart(options?: { extraArgs?: readonly string[] }): Promise<void>;
}

const HOST = "127.0.0.1";
const READY_TIMEOUT_MS = 10_000;
const servers = new Set<RedisServer>();
let exitHookInstalled = false;

/**
 * Names the environment variable holding the directory where startRedisServer() records the servers it
 * starts, so that the global teardown can reap those a crashed test worker left behind. The global setup
 * sets it inside the vitest process (it never passes through turbo, hence not in turbo.json's globalEnv).
 */
export const REGISTRY_ENV = "ONCE_TEST_REDIS_REGISTRY";

/** The redis-server to run: `REDIS_SERVER_BIN`, else `redis-server` on PATH. */
export function redisServerBin(env: Record<string, string | undefined> = process.env): string {
  return env.REDIS_SERVER_BIN || "redis-server";
}

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

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface ServerSettings {
  bin: string;
  args: readonly string[];
  logFile: string;
  /** Set when daemonized. */
  pidFile: string | undefined;
  ownsDir: boolean;
}

class RedisServer implements RedisServerHandle {
  readonly url: string;
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #pid = 0;
  #removed = false;
  /** The arguments of the current start: its own, then what `restart()` added. */
  #args: readonly string[];
  readonly #settings: ServerSettings;

  constructor(
    readonly port: number,
    readonly dir: string,
    settings: ServerSettings,
  ) {
    this.url = `redis://${HOST}:${port}`;
    this.#settings = settings;
    this.#args = settings.args;
  }

  get pid(): number {
    return this.running ? this.#pid : 0;
  }

  get running(): boolean {
    if (this.#settings.pidFile !== undefined) return processAlive(this.#pid);
    const child = this.#child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  /** Starts the process and waits for PING; throws (after cleaning up the process) if it never answers. */
  async spawn(): Promise<void> {
    if (this.#removed) throw new Error(`redis-server on port ${this.port} was stopped; its dir is gone`);
    if (this.running) throw new Error(`redis-server on port ${this.port} is already running`);
    if (this.#settings.pidFile !== undefined) return this.#spawnDetached(this.#settings.pidFile);
    const { bin } = this.#settings;
    const child = spawn(bin, [...this.#args], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString("utf8")).slice(-4000);
    });
    let spawnError: Error | undefined;
    this.#exited = new Promise((resolve) => {
      child.once("exit", () => resolve());
      child.once("error", (error: NodeJS.ErrnoException) => {
        spawnError = error.code === "ENOENT" ? new MissingRedisServerError(bin, { cause: error }) : error;
        resolve();
      });
    });
    this.#child = child;
    this.#pid = child.pid ?? 0;
    servers.add(this);
    installExitHook();

    const exited = () => spawnError !== undefined || child.exitCode !== null || child.signalCode !== null;
    if (await waitForRedis(HOST, this.port, { timeoutMs: READY_TIMEOUT_MS, giveUp: exited })) {
      this.#register();
      return;
    }
    const exitedEarly = child.exitCode !== null || child.signalCode !== null;
    if (!exitedEarly && !spawnError) {
      child.kill("SIGKILL");
      await this.#exited;
    }
    if (spawnError) throw spawnError;
    throw new Error(
      `redis-server on port ${this.port} ${
        exitedEarly ? `exited (${child.signalCode ?? child.exitCode})` : "did not answer PING within 10s"
      }; log:\n${tail(this.#settings.logFile)}${stderr ? `\nstderr:\n${stderr.trim()}` : ""}`,
    );
  }

  async #spawnDetached(pidFile: string): Promise<void> {
    const { bin } = this.#settings;
    rmSync(pidFile, { force: true });
    // It forks and the command returns at once; the server goes on in the background.
    const result = spawnSync(bin, [...this.#args], { encoding: "utf8" });
    if (result.error) {
      const error = result.error as NodeJS.ErrnoException;
      throw error.code === "ENOENT" ? new MissingRedisServerError(bin, { cause: error }) : error;
    }
    if (result.status !== 0) {
      throw new Error(
        `redis-server on port ${this.port} exited with ${result.status}: ${(result.stderr || result.stdout).trim()}`,
      );
    }
    const readPid = () => {
      try {
        const pid = Number(readFileSync(pidFile, "utf8").trim());
        if (Number.isInteger(pid) && pid > 0) this.#pid = pid;
      } catch {
        // Not written yet.
      }
      return this.#pid;
    };
    const gone = () => readPid() > 0 && !processAlive(this.#pid);
    const answered = await waitForRedis(HOST, this.port, { timeoutMs: READY_TIMEOUT_MS, giveUp: gone });
    readPid();
    if (answered && this.#pid > 0) return;
    if (processAlive(this.#pid)) {
      process.kill(this.#pid, "SIGKILL");
      await pollUntil(() => !processAlive(this.#pid), { timeoutMs: 5_000 });
    }
    throw new Error(
      `redis-server on port ${this.port} ${answered ? "wrote no pid file" : "did not answer PING within 10s"}; its log:\n${tail(this.#settings.logFile)}`,
    );
  }

  /** Resolves true once the process is gone, false if it is still there after `timeoutMs`. */
  #gone(timeoutMs: number): Promise<boolean> {
    if (this.#settings.pidFile !== undefined) {
      return pollUntil(() => !processAlive(this.#pid), { timeoutMs, intervalMs: 100 });
    }
    return Promise.race([this.#exited.then(() => true), sleep(timeoutMs).then(() => false)]);
  }

  #signal(signal: NodeJS.Signals): void {
    try {
      if (this.#settings.pidFile !== undefined) process.kill(this.#pid, signal);
      else this.#child?.kill(signal);
    } catch {
      // Gone in the meantime.
    }
  }

  #register(): void {
    const file = registryFile(this.#pid);
    if (!file) return;
    try {
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, JSON.stringify({ pid: this.#pid, port: this.port, dir: this.dir }));
    } catch {
      // Best effort: the registry only helps the global teardown reap leftovers.
    }
  }

  #unregister(): void {
    const file = this.#settings.pidFile === undefined ? registryFile(this.#pid) : undefined;
    if (file) rmSync(file, { force: true });
  }

  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    if (!this.running) return;
    this.#signal(signal);
    if (!(await this.#gone(15_000))) {
      this.#signal("SIGKILL");
      await this.#gone(15_000);
    }
    this.#unregister();
  }

  /** Graceful stop that keeps the dir: SHUTDOWN NOSAVE (the AOF is still flushed), SIGKILL after 10s. */
  async #shutdown(): Promise<void> {
    if (!this.running) return;
    try {
      await redisCommand(HOST, this.port, ["SHUTDOWN", "NOSAVE"], { timeoutMs: 5000 });
    } catch {
      // Redis closes the connection without a reply when it shuts down.
    }
    if (!(await this.#gone(10_000))) {
      this.#signal("SIGKILL");
      await this.#gone(15_000);
    }
    this.#unregister();
  }

  async stop(): Promise<void> {
    await this.#shutdown();
    servers.delete(this);
    this.#removeDir();
  }

  async restart(options: { extraArgs?: readonly string[] } = {}): Promise<void> {
    await this.#shutdown();
    this.#args = [...this.#settings.args, ...(options.extraArgs ?? [])];
    await this.spawn();
  }

  /** Synchronous kill and cleanup for the process exit hook (never for a detached server). */
  killSync(): void {
    if (this.#settings.pidFile !== undefined) return;
    if (this.running) this.#child?.kill("SIGKILL");
    this.#unregister();
    this.#removeDir();
  }

  #removeDir(): void {
    if (this.#removed) return;
    this.#removed = true;
    if (this.#settings.ownsDir) rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Starts a redis-server on 127.0.0.1 (no RDB snapshots, noeviction, AOF per options) and waits until it
 * answers PING. By default it is a child of this process in a fresh temp dir: stop it with `handle.stop()`
 * or `stopAllRedisServers()`; leftovers are killed at exit and by the global teardown.
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServerHandle> {
  const attempts = options.port === undefined ? 3 : 1;
  const bin = options.bin ?? redisServerBin();
  let lastError: unknown;
  for (let attempt = 0; attempt < attempts; attempt++) {
    const port = options.port ?? (await freePort());
    const dir = options.dir ?? mkdtempSync(path.join(os.tmpdir(), "once-redis-"));
    const logFile = options.logFile ?? path.join(dir, "redis.log");
    const pidFile = options.detached ? (options.pidFile ?? path.join(dir, "redis.pid")) : undefined;
    const args = [
      ...(options.configFile === undefined ? [] : [options.configFile]),
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
      pidFile === undefined ? "no" : "yes",
      ...(pidFile === undefined ? [] : ["--pidfile", pidFile]),
      "--logfile",
      logFile,
      ...(options.extraArgs ?? []),
    ];
    const server = new RedisServer(port, dir, {
      bin,
      args,
      logFile,
      pidFile,
      ownsDir: options.dir === undefined,
    });
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

/** Stops every server startRedisServer() started in this process and has not stopped yet. */
export async function stopAllRedisServers(): Promise<void> {
  await Promise.all([...servers].map((server) => server.stop()));
}
