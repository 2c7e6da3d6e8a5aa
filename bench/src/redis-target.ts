import { type ChildProcess, spawn } from "node:child_process";
import net from "node:net";
import { Redis } from "ioredis";

/** The Redis the bench measures against, and how to let go of it. */
export interface RedisTarget {
  host: string;
  port: number;
  /** True when the bench started this server itself: its stats count nothing but the bench. */
  dedicated: boolean;
  /**
   * A new client; `forWorker` sets `maxRetriesPerRequest: null`, which BullMQ workers need;
   * `autoPipelining` sets ioredis' `enableAutoPipelining`.
   */
  connect(options?: { forWorker?: boolean; autoPipelining?: boolean }): Redis;
  stop(): Promise<void>;
}

/**
 * Starts a throwaway `redis-server` on a free loopback port, with no persistence, so INFO commandstats
 * and CPU figures count the bench alone (a shared Redis also serves other people's tests).
 */
export async function startDedicatedRedis(bin: string): Promise<RedisTarget> {
  const port = await freePort();
  const child = spawn(
    bin,
    [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--maxmemory-policy",
      "noeviction",
      "--loglevel",
      "warning",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<never>((_, reject) => {
    child.once("error", (error) => reject(new Error(`could not start ${bin}: ${error.message}`)));
    child.once("exit", (code) => reject(new Error(`${bin} exited with ${code}: ${stderr.trim()}`)));
  });
  exited.catch(() => {});
  await Promise.race([waitForPing("127.0.0.1", port, 10_000), exited]);
  return target("127.0.0.1", port, true, () => stopChild(child));
}

/** An existing Redis, e.g. `redis://127.0.0.1:6379`. The bench cleans up its prefixes; it stops nothing. */
export async function useExistingRedis(url: string): Promise<RedisTarget> {
  const parsed = new URL(url);
  const host = parsed.hostname || "127.0.0.1";
  const port = Number(parsed.port || 6379);
  await waitForPing(host, port, 5_000);
  return target(host, port, false, async () => {});
}

function target(host: string, port: number, dedicated: boolean, stop: () => Promise<void>): RedisTarget {
  return {
    host,
    port,
    dedicated,
    connect: (options = {}) =>
      new Redis({
        host,
        port,
        ...(options.forWorker ? { maxRetriesPerRequest: null } : {}),
        ...(options.autoPipelining ? { enableAutoPipelining: true } : {}),
      }),
    stop,
  };
}

async function waitForPing(host: string, port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new Redis({
      host,
      port,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.ping();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`Redis at ${host}:${port} did not answer`, { cause: error });
    } finally {
      client.disconnect();
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === "object") resolve(address.port);
        else reject(new Error("no port"));
      });
    });
  });
}

/** Stops the server we spawned (SIGTERM, then SIGKILL after 5 s): only ever our own child. */
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
  await gone;
  clearTimeout(timer);
}
