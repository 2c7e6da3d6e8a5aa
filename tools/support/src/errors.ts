/** The redis-server binary (REDIS_SERVER_BIN, or `redis-server` on PATH) cannot be run: it is not installed. */
export class MissingRedisServerError extends Error {
  override readonly name = "MissingRedisServerError";
  constructor(
    readonly bin: string,
    options?: { cause?: unknown },
  ) {
    super(
      `cannot run ${bin}: not found. Install Redis (Debian/Ubuntu: \`apt-get install -y redis-server\`, ` +
        "macOS: `brew install redis`) or set REDIS_SERVER_BIN to its path.",
      options,
    );
  }
}
