import { parseRedisUrl, startRedisServer, waitForRedis } from "@once/support";
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
  const server = await startRedisServer({ bin, extraArgs: ["--loglevel", "warning"] });
  return target("127.0.0.1", server.port, true, () => server.stop());
}

/** An existing Redis, e.g. `redis://127.0.0.1:6379`. The bench cleans up its prefixes; it stops nothing. */
export async function useExistingRedis(url: string): Promise<RedisTarget> {
  const { host, port, ...auth } = parseRedisUrl(url);
  if (!(await waitForRedis(host, port, { timeoutMs: 5_000, ...auth }))) {
    throw new Error(`Redis at ${host}:${port} did not answer`);
  }
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
