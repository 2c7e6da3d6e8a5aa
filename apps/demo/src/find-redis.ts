import {
  MissingRedisServerError,
  parseRedisUrl,
  pingRedis,
  redisServerBin,
  startRedisServer,
} from "@once/support";

export interface FoundRedis {
  url: string;
  /** Where it came from, for the header line. */
  source: "REDIS_URL" | "local Redis" | "throwaway redis-server";
  /** The pid of the throwaway redis-server, when the demo started one. */
  pid?: number;
  /** Stops the redis-server the demo started (a no-op otherwise). */
  stop(): Promise<void>;
}

/** The reason the demo cannot run: no Redis anywhere, and no redis-server to start. */
export class NoRedisError extends Error {
  override readonly name = "NoRedisError";
}

/**
 * A Redis for the demo: `REDIS_URL` if set; else 127.0.0.1:6379 if it answers; else a throwaway
 * `redis-server` (REDIS_SERVER_BIN or on PATH) on a free port, stopped by `stop()`; else NoRedisError
 * naming `docker compose up -d redis`.
 */
export async function findRedis(
  options: { env?: Record<string, string | undefined>; defaultPort?: number } = {},
): Promise<FoundRedis> {
  const env = options.env ?? process.env;
  const defaultPort = options.defaultPort ?? 6379;
  const none = async () => {};
  if (env.REDIS_URL) {
    const { protocol, host, port, password } = parseRedisUrl(env.REDIS_URL);
    // rediss:// and authenticated URLs are left to the clients; a plain one must answer now.
    if (protocol === "redis:" && !password && !(await pingRedis(host, port))) {
      throw new NoRedisError(`REDIS_URL=${env.REDIS_URL} does not answer PING`);
    }
    return { url: env.REDIS_URL, source: "REDIS_URL", stop: none };
  }
  if (await pingRedis("127.0.0.1", defaultPort)) {
    return { url: `redis://127.0.0.1:${defaultPort}`, source: "local Redis", stop: none };
  }
  const bin = redisServerBin(env);
  try {
    const server = await startRedisServer({ bin });
    return {
      url: server.url,
      source: "throwaway redis-server",
      ...(server.pid > 0 ? { pid: server.pid } : {}),
      stop: () => server.stop(),
    };
  } catch (error) {
    const reason =
      error instanceof MissingRedisServerError
        ? `${bin} is not installed`
        : `${bin} failed: ${error instanceof Error ? error.message : String(error)}`;
    throw new NoRedisError(
      `no Redis answers at 127.0.0.1:${defaultPort} and ${reason}.\n` +
        "Start one with `docker compose up -d redis` (from the repository root), or install redis-server, or set REDIS_URL.",
    );
  }
}
