// `node dist/main.js [--http PORT] [--host 127.0.0.1] [--redis-url URL] [--prefix P]
//   [--payments-url URL | --payments] [--lease-ms N] [--seed-order ID]…`
// The order agent's tools as an MCP server through once. stdio by default (stdout is the MCP channel, so
// notices go to stderr; it exits when the client closes stdin); with --http PORT, Streamable HTTP at
// http://HOST:PORT/mcp, and one JSON line {"type":"ready","url":…} on stdout once listening (port 0 picks
// a free one). --payments starts the payments stand-in in this process, for a try with nothing else running.
// Each flag falls back to an environment variable (REDIS_URL, ONCE_PREFIX, PAYMENTS_URL, ONCE_LEASE_MS),
// then to a default. SIGTERM or SIGINT closes it and exits 0.
import { parseArgs } from "node:util";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { type PaymentsServer, startPaymentsServer } from "@once/payments";
import { startOrderMcpServer } from "./order-mcp-server.js";
import { serveHttp } from "./serve-http.js";

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
        "redis-url": { type: "string" },
        prefix: { type: "string" },
        "payments-url": { type: "string" },
        payments: { type: "boolean", default: false },
        "lease-ms": { type: "string" },
        "seed-order": { type: "string", multiple: true },
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
const env = process.env;
if (args.payments && args["payments-url"] !== undefined) fail("give --payments or --payments-url, not both");
const httpPort = integer("--http", args.http, 0);
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
if (httpPort === undefined) {
  const server = orders.newServer();
  await server.connect(new StdioServerTransport());
  // The SDK's stdio transport does not notice its client leaving: stdin's end is the client closing.
  process.stdin.once("end", () => void shutdown());
  closeTransport = () => server.close();
  process.stderr.write(
    `mcp-server: ${orders.tools.length} tools over stdio${payments ? `, payments at ${payments.url}` : ""}\n`,
  );
} else {
  const http = await serveHttp(orders.newServer, httpPort, args.host).catch((error: unknown) =>
    fail(String(error)),
  );
  closeTransport = () => http.close();
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
