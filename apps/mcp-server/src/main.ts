// The order agent's tools as an MCP server through once, over stdio or Streamable HTTP: see USAGE below
// (`node dist/main.js --help`). stdout is the MCP channel over stdio, so notices go to stderr.
import { parseArgs } from "node:util";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { isLoopbackHost, McpHttpGuard } from "@once/mcp";
import { type PaymentsServer, startPaymentsServer } from "@once/payments";
import { startOrderMcpServer } from "./order-mcp-server.js";
import { serveHttp } from "./serve-http.js";

const USAGE = `Usage: node dist/main.js [options]

The order agent's tools as an MCP server through once: an effect call names its step in
_meta["once/step"] and charges once, however often it is sent. stdio by default (it exits when the client
closes stdin); SIGTERM or SIGINT closes it and exits 0.

  --http PORT              Streamable HTTP at http://HOST:PORT/mcp instead of stdio (0 picks a free port);
                           prints {"type":"ready","url":…} on stdout once listening
  --host ADDR              the address to listen on (default 127.0.0.1). Not a loopback address: a bearer
                           token is required, or --insecure-no-auth
  --token TOKEN            every request must send Authorization: Bearer TOKEN (16 characters or more).
                           Env ONCE_MCP_TOKEN, which other users cannot read from the process list as they
                           can a flag
  --insecure-no-auth       listen on a non-loopback --host with no token: anyone who can reach the port can
                           call every tool, charges included (a warning is printed at start)
  --allowed-host NAME      a name the Host header may carry, on any port; repeat for more. Default: loopback
                           names on a loopback --host, any name on another (the token stands guard)
  --allowed-origin ORIGIN  an Origin a browser's request may come from (https://agent.example); repeat for
                           more. Default: this server's own loopback origins. A request without Origin (not
                           from a browser) is not checked
  --redis-url URL          env REDIS_URL, default redis://127.0.0.1:6379
  --prefix P               root of every key; env ONCE_PREFIX, default once:
  --payments-url URL       the payments provider; env PAYMENTS_URL, default http://127.0.0.1:4010
  --payments               start the payments stand-in in this process instead, for a try with nothing else
  --lease-ms N             once's lease of an effect call; env ONCE_LEASE_MS, default 30000
  --seed-order ID          create the order (pending, 42.00 eur) unless it exists; repeat for more
  -h, --help               print this and exit
`;

function fail(message: string): never {
  process.stderr.write(`mcp-server: ${message}\n`);
  process.exit(2);
}

function parseCommandLine() {
  try {
    return parseArgs({
      options: {
        http: { type: "string" },
        host: { type: "string", default: "127.0.0.1" },
        token: { type: "string" },
        "insecure-no-auth": { type: "boolean", default: false },
        "allowed-host": { type: "string", multiple: true },
        "allowed-origin": { type: "string", multiple: true },
        "redis-url": { type: "string" },
        prefix: { type: "string" },
        "payments-url": { type: "string" },
        payments: { type: "boolean", default: false },
        "lease-ms": { type: "string" },
        "seed-order": { type: "string", multiple: true },
        help: { type: "boolean", short: "h", default: false },
      },
    }).values;
  } catch (error) {
    fail((error as Error).message);
  }
}

function integer(name: string, text: string | undefined, min: number): number | undefined {
  if (text === undefined || text === "") return undefined;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min) fail(`${name} must be an integer ≥ ${min}, got '${text}'`);
  return value;
}

const args = parseCommandLine();
if (args.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const env = process.env;
if (args.payments && args["payments-url"] !== undefined) fail("give --payments or --payments-url, not both");
const httpPort = integer("--http", args.http, 0);
const guard = httpAccess();

/** Who may call over HTTP; every flag checked before anything starts. */
function httpAccess() {
  const given = (["token", "insecure-no-auth", "allowed-host", "allowed-origin"] as const).filter(
    (flag) => args[flag] !== undefined && args[flag] !== false,
  );
  if (httpPort === undefined) {
    if (given.length > 0) fail(`--${given[0]} applies to --http only`);
    return undefined;
  }
  const token = args.token ?? (env.ONCE_MCP_TOKEN || undefined);
  const insecureNoAuth = args["insecure-no-auth"];
  if (token !== undefined && insecureNoAuth)
    fail("give a token (--token or ONCE_MCP_TOKEN) or --insecure-no-auth, not both");
  // The guard refuses these too; here they are said in the flags' words.
  if (!isLoopbackHost(args.host) && token === undefined && !insecureNoAuth)
    fail(
      `--host ${args.host} is not a loopback address, so anyone who can reach the port could call the tools, ` +
        "charges included: give a bearer token (ONCE_MCP_TOKEN or --token; clients then send " +
        "Authorization: Bearer <token>), or --insecure-no-auth to serve it with none",
    );
  try {
    return new McpHttpGuard({
      host: args.host,
      ...(token === undefined ? {} : { token }),
      insecureNoAuth,
      ...(args["allowed-host"] === undefined ? {} : { allowedHosts: args["allowed-host"] }),
      ...(args["allowed-origin"] === undefined ? {} : { allowedOrigins: args["allowed-origin"] }),
    });
  } catch (error) {
    fail((error as Error).message);
  }
}
const payments: PaymentsServer | undefined = args.payments
  ? await startPaymentsServer().catch((error: unknown) => fail(`payments: ${String(error)}`))
  : undefined;
const leaseMs = integer("--lease-ms", args["lease-ms"] ?? env.ONCE_LEASE_MS, 100);
const orders = await startOrderMcpServer({
  redisUrl: args["redis-url"] ?? env.REDIS_URL ?? "redis://127.0.0.1:6379",
  prefix: args.prefix ?? env.ONCE_PREFIX ?? "once:",
  paymentsUrl: payments?.url ?? args["payments-url"] ?? env.PAYMENTS_URL ?? "http://127.0.0.1:4010",
  ...(leaseMs === undefined ? {} : { leaseMs }),
  seedOrders: args["seed-order"] ?? [],
}).catch((error: unknown) =>
  fail(error instanceof Error ? `${error.name}: ${error.message}` : String(error)),
);

let closeTransport: () => Promise<void>;
if (httpPort === undefined || guard === undefined) {
  const server = orders.newServer();
  await server.connect(new StdioServerTransport());
  // The SDK's stdio transport does not notice its client leaving: stdin's end is the client closing.
  process.stdin.once("end", () => void shutdown());
  closeTransport = () => server.close();
  process.stderr.write(
    `mcp-server: ${orders.tools.length} tools over stdio${payments ? `, payments at ${payments.url}` : ""}\n`,
  );
} else {
  const http = await serveHttp(orders.newServer, httpPort, guard).catch((error: unknown) =>
    fail(String(error)),
  );
  closeTransport = () => http.close();
  if (guard.unauthenticated)
    process.stderr.write(
      `mcp-server: warning: --insecure-no-auth: ${http.url} takes calls with no authentication from anyone ` +
        "who can reach it, charges included\n",
    );
  process.stdout.write(
    `${JSON.stringify({ type: "ready", url: http.url, pid: process.pid, tools: orders.tools, ...(payments ? { payments: payments.url } : {}) })}\n`,
  );
}

let stopping = false;
async function shutdown(): Promise<void> {
  if (stopping) return;
  stopping = true;
  try {
    await closeTransport();
    await orders.close();
    await payments?.close();
    process.exit(0);
  } catch (error) {
    fail(`could not stop cleanly: ${String(error)}`);
  }
}
for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => void shutdown());
