import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

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
    const url = new URL(env.REDIS_URL);
    // rediss:// and authenticated URLs are left to the clients; a plain one must answer now.
    if (
      url.protocol === "redis:" &&
      !url.password &&
      !(await answersPing(url.hostname || "127.0.0.1", Number(url.port || 6379)))
    ) {
      throw new NoRedisError(`REDIS_URL=${env.REDIS_URL} does not answer PING`);
    }
    return { url: env.REDIS_URL, source: "REDIS_URL", stop: none };
  }
  if (await answersPing("127.0.0.1", defaultPort)) {
    return { url: `redis://127.0.0.1:${defaultPort}`, source: "local Redis", stop: none };
  }
  return startThrowawayRedis(env.REDIS_SERVER_BIN || "redis-server", defaultPort);
}

async function startThrowawayRedis(binary: string, defaultPort: number): Promise<FoundRedis> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), "once-demo-redis-"));
  let child: ChildProcess;
  try {
    child = spawn(
      binary,
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    const [error] = await Promise.race([
      once(child, "error") as Promise<[Error]>,
      once(child, "spawn").then(() => [undefined] as const),
    ]);
    if (error) throw error;
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    const missing = (error as NodeJS.ErrnoException).code === "ENOENT";
    throw new NoRedisError(
      `no Redis answers at 127.0.0.1:${defaultPort} and ${missing ? `${binary} is not installed` : `${binary} failed: ${String(error)}`}.\n` +
        "Start one with `docker compose up -d redis` (from the repository root), or install redis-server, or set REDIS_URL.",
    );
  }
  const exited = once(child, "exit");
  const deadline = Date.now() + 10_000;
  while (!(await answersPing("127.0.0.1", port))) {
    if (Date.now() > deadline || child.exitCode !== null) {
      child.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
      throw new NoRedisError(`the throwaway ${binary} on port ${port} did not answer within 10 s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    source: "throwaway redis-server",
    ...(child.pid === undefined ? {} : { pid: child.pid }),
    async stop() {
      // Only the process this demo started, by its handle.
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** True when host:port answers `PING` with `+PONG` within half a second. */
export function answersPing(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.createConnection({ host, port });
    let reply = "";
    const finish = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => finish(false));
    socket.once("error", () => finish(false));
    socket.once("connect", () => socket.write("*1\r\n$4\r\nPING\r\n"));
    socket.on("data", (chunk) => {
      reply += chunk.toString("latin1");
      // -NOAUTH means a Redis is there, but this demo would need the URL with its password.
      if (reply.includes("\r\n")) finish(reply.startsWith("+PONG"));
    });
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}
