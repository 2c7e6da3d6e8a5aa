import { once } from "node:events";
import { readFileSync } from "node:fs";
import http from "node:http";
import { createConsole, toNodeListener } from "@once/console";
import { allowedHostsOf, checkJaegerUrl, checkToken, hostsServedAt } from "@once/console/internal";
import type { OperatorStore } from "@once/core";
import { RedisOperatorStore } from "@once/redis";
import type { Command } from "../command.js";
import { parseDuration } from "../durations.js";
import { CommandFailedError, UsageError } from "../errors.js";
import { ExitCode } from "../exit-code.js";
import { CONNECTION_OPTIONS } from "../options.js";
import { positiveInteger } from "../positive-integer.js";
import { openRedis, redisTarget, storePrefix } from "../redis-connection.js";
import { openPostgres, storeSelected } from "../store-session.js";

const DEFAULT_PORT = 4100;

/** `once console`: the console's web page on this machine, until Ctrl-C. */
export const consoleCommand: Command = {
  name: "console",
  summary: "serve the console: a web page with the records by state and tool, and resolving unknown ones",
  usage: [
    "console [--port <port>] [--host <address>] [--allowed-hosts <host,…>] [--jaeger-url <url>] [--refresh <duration>] [options]",
    "console --allow-writes [--token-file <path>] [options]",
  ],
  options: [
    "port",
    "host",
    "allowed-hosts",
    "jaeger-url",
    "allow-writes",
    "token-file",
    "refresh",
    ...CONNECTION_OPTIONS,
  ],
  details:
    "Serves the console on http://<host>:<port>/ until interrupted: counts by state and tool (as once stats), " +
    "records by state, tool and age with a cursor (SCAN, as once list), one record with every field and a " +
    "link to its trace in Jaeger (--jaeger-url), refreshed without a reload; it says when Redis does not " +
    "answer, and carries on when it does again. Read-only unless --allow-writes, which needs a token of 16 " +
    "characters or more, from ONCE_CONSOLE_TOKEN or --token-file (never on the command line, where other " +
    "users could read it); whoever logs in with it may resolve unknown records as once resolve does, fenced, " +
    "with who and why kept. It listens on 127.0.0.1 unless --host says otherwise, and answers only to the " +
    "hosts it listens on (for 127.0.0.1: localhost, 127.0.0.1 and [::1], with the port), so that a page on " +
    "another name pointed at this machine (DNS rebinding) cannot read the records; behind a proxy that " +
    "passes the browser's host, or under a DNS name, list that name in --allowed-hosts.",
  examples: [
    "once console",
    "once console --port 8080 --jaeger-url http://localhost:16686",
    "once console --host 0.0.0.0 --allowed-hosts ops.example.com,ops.example.com:8443",
    "ONCE_CONSOLE_TOKEN=$(openssl rand -hex 24) once console --allow-writes --prefix checkout:",
  ],
  async run({ io, options }) {
    const portText = options.string("port");
    const port = portText === undefined ? DEFAULT_PORT : positiveInteger("--port", portText, 0);
    if (port > 65_535) throw new UsageError(`--port ${port} is not a port`);
    const host = options.string("host") ?? "127.0.0.1";
    const allowedText = options.list("allowed-hosts");
    if (options.has("allowed-hosts")) usage(() => allowedHostsOf(allowedText, "--allowed-hosts"));
    const refreshText = options.string("refresh");
    const refreshMs = refreshText === undefined ? undefined : parseDuration("--refresh", refreshText);
    const jaegerText = options.string("jaeger-url");
    const jaegerUrl =
      jaegerText === undefined ? undefined : usage(() => checkJaegerUrl(jaegerText, "--jaeger-url"));
    const allowWrites = options.flag("allow-writes");
    const tokenFile = options.string("token-file");
    if (tokenFile !== undefined && !allowWrites)
      throw new UsageError("--token-file goes with --allow-writes: a read-only console needs no token");
    const token = allowWrites ? readToken(tokenFile, io.env) : undefined;
    const { store, commandOptions, close } = await openStore(options, io);
    // The console answers to the hosts of the address it listens on, with the port it got (0 picks one), so
    // the handler is made once the server listens, before it takes a request.
    const server = http.createServer();
    try {
      server.listen(port, host);
      await once(server, "listening");
    } catch (error) {
      await close();
      throw new CommandFailedError(`cannot listen on ${host}:${port}: ${(error as Error).message}`, {
        cause: error,
      });
    }
    const address = server.address();
    const actualPort = typeof address === "object" && address !== null ? address.port : port;
    const allowedHosts = [...new Set([...hostsServedAt(host, actualPort), ...allowedText])];
    const handler = createConsole({
      store,
      allowWrites,
      allowedHosts,
      ...(commandOptions === undefined ? {} : { commandOptions }),
      ...(token === undefined ? {} : { token }),
      ...(jaegerUrl === undefined ? {} : { jaegerUrl }),
      ...(refreshMs === undefined ? {} : { refreshMs }),
      onError: (error) => io.stderr.write(`once console: a request failed: ${describe(error)}\n`),
    });
    server.on("request", toNodeListener(handler));
    const shown = host.includes(":") ? `[${host}]` : host;
    io.stdout.write(
      `once console on http://${shown}:${actualPort}/ (${allowWrites ? "writes allowed with the token" : "read-only"}); ` +
        `store ${store.label}. Ctrl-C stops it.\n` +
        `It answers to the hosts ${allowedHosts.join(", ")} (more with --allowed-hosts).\n`,
    );

    const signal = await new Promise<NodeJS.Signals>((resolve) => {
      process.once("SIGINT", () => resolve("SIGINT"));
      process.once("SIGTERM", () => resolve("SIGTERM"));
    });
    io.stderr.write(`once console: ${signal}, stopping\n`);
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await close();
    return ExitCode.ok;
  },
};

/**
 * The console's store: on PostgreSQL with --postgres-url (the schema must be usable at start), else on Redis,
 * whose client reconnects on its own while the console says whether Redis answers.
 */
async function openStore(
  options: Parameters<Command["run"]>[0]["options"],
  io: Parameters<Command["run"]>[0]["io"],
): Promise<{ store: OperatorStore; commandOptions: string | undefined; close: () => Promise<void> }> {
  if (storeSelected(options) === "postgres") {
    const { session, close } = await openPostgres(options);
    const schema = options.string("schema");
    const tablePrefix = options.string("table-prefix");
    return {
      store: session.operator,
      commandOptions:
        `--postgres-url '${session.label}'` +
        (schema === undefined ? "" : ` --schema ${schema}`) +
        (tablePrefix === undefined ? "" : ` --table-prefix ${tablePrefix}`),
      close,
    };
  }
  const prefix = storePrefix(options);
  const target = redisTarget(options, io.env);
  const redis = openRedis(target, (up, reason) => {
    io.stderr.write(
      up ? `once console: Redis answers (${target.label})\n` : `once console: Redis unreachable: ${reason}\n`,
    );
  });
  const store = new RedisOperatorStore({
    redis,
    prefix,
    label: `${target.label}, prefix ${JSON.stringify(prefix)}`,
  });
  return {
    store,
    commandOptions: prefix === "once:" ? undefined : `--prefix ${prefix}`,
    close: async () => {
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** The token from --token-file, else ONCE_CONSOLE_TOKEN; it is never printed. */
function readToken(file: string | undefined, env: NodeJS.ProcessEnv): string {
  let token: string | undefined;
  if (file !== undefined) {
    try {
      token = readFileSync(file, "utf8").trim();
    } catch (error) {
      throw new UsageError(`--token-file ${file}: ${(error as Error).message}`);
    }
  } else {
    token = env.ONCE_CONSOLE_TOKEN?.trim();
  }
  if (token === undefined || token === "")
    throw new UsageError(
      "--allow-writes needs a token: set ONCE_CONSOLE_TOKEN or pass --token-file <path> (resolving must not be open to anyone who reaches the port)",
    );
  return usage(() => checkToken(token));
}

/** Runs a check of the console's; its RangeError, which names the option, is bad usage. */
function usage<T>(check: () => T): T {
  try {
    return check();
  } catch (error) {
    if (error instanceof RangeError) throw new UsageError(error.message);
    throw error;
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}
