// CLI: `node dist/main.js [--port 4010] [--host 127.0.0.1] [--p50 50 --p99 2000 | --fixed-ms N | --no-latency]
//        [--honour-idempotency-key] [--seed 7]`
// Prints one JSON line, {"url":"http://127.0.0.1:PORT"}, once listening: with --port 0 the parent learns the port.
import { parseArgs } from "node:util";
import type { LatencyConfig } from "./latency.js";
import { startPaymentsServer } from "./payments-server.js";

function fail(message: string): never {
  process.stderr.write(`payments: ${message}\n`);
  process.exit(2);
}

function integer(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0)
    fail(`--${name} must be a non-negative integer, got '${text}'`);
  return value;
}

function parseCommandLine() {
  try {
    return parseArgs({
      options: {
        port: { type: "string", default: "4010" },
        host: { type: "string", default: "127.0.0.1" },
        p50: { type: "string" },
        p99: { type: "string" },
        "fixed-ms": { type: "string" },
        "no-latency": { type: "boolean", default: false },
        "honour-idempotency-key": { type: "boolean", default: false },
        seed: { type: "string" },
      },
    }).values;
  } catch (error) {
    fail((error as Error).message);
  }
}

const args = parseCommandLine();
const fixedMs = integer("fixed-ms", args["fixed-ms"]);
const latency: LatencyConfig = args["no-latency"]
  ? "none"
  : fixedMs !== undefined
    ? { fixedMs }
    : { p50Ms: integer("p50", args.p50) ?? 50, p99Ms: integer("p99", args.p99) ?? 2000 };

const server = await startPaymentsServer({
  port: integer("port", args.port) ?? 4010,
  host: args.host,
  latency,
  honourIdempotencyKey: args["honour-idempotency-key"],
  seed: integer("seed", args.seed),
}).catch((error: unknown) => fail(String(error)));

process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    // Closing drops pending answers and sockets, so the event loop empties and the process exits 0.
    server.close().catch((error: unknown) => fail(String(error)));
  });
}
