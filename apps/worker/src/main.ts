// `node dist/main.js [--redis-url URL] [--queue NAME] [--prefix P] [--concurrency N] [--lease-ms N]
//   [--lock-ms N] [--stalled-ms N] [--retention-ms N] [--payments-url URL] [--attempts N] [--backoff-ms N]
//   [--count-outcomes] [--postgres-url URL [--schema S]]`
// With --postgres-url the queue (BullMQ's Postgres backend), the store (PostgresStore), the orders and the
// counters are all on PostgreSQL under schema S (default once_orders); --redis-url and --prefix are unused.
// Each flag falls back to an environment variable (REDIS_URL, ONCE_QUEUE, ONCE_PREFIX, ONCE_CONCURRENCY,
// ONCE_LEASE_MS, PAYMENTS_URL, …), then to a default. Prints one JSON line when ready; SIGTERM or SIGINT
// finishes the running calls, flushes spans and exits 0.
import { parseArgs } from "node:util";
import { ORDER_JOB_RETRY, startTracing } from "@once/order-agent";
import { startOrderWorker } from "./order-worker.js";

function fail(message: string): never {
  process.stderr.write(`worker: ${message}\n`);
  process.exit(2);
}

function parseCommandLine() {
  try {
    return parseArgs({
      options: {
        "redis-url": { type: "string" },
        "postgres-url": { type: "string" },
        schema: { type: "string" },
        queue: { type: "string" },
        prefix: { type: "string" },
        concurrency: { type: "string" },
        "lease-ms": { type: "string" },
        "lock-ms": { type: "string" },
        "stalled-ms": { type: "string" },
        "retention-ms": { type: "string" },
        "payments-url": { type: "string" },
        attempts: { type: "string" },
        "backoff-ms": { type: "string" },
        "count-outcomes": { type: "boolean", default: false },
      },
    }).values;
  } catch (error) {
    fail((error as Error).message);
  }
}

function positive(name: string, text: string | undefined): number | undefined {
  if (text === undefined || text === "") return undefined;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value <= 0) fail(`${name} must be a positive integer, got '${text}'`);
  return value;
}

const args = parseCommandLine();
const env = process.env;
const attempts = positive("--attempts", args.attempts ?? env.ONCE_ATTEMPTS) ?? ORDER_JOB_RETRY.attempts;
const backoffMs =
  positive("--backoff-ms", args["backoff-ms"] ?? env.ONCE_BACKOFF_MS) ?? ORDER_JOB_RETRY.backoff.delay;
const config = {
  redisUrl: args["redis-url"] ?? env.REDIS_URL ?? "redis://127.0.0.1:6379",
  queue: args.queue ?? env.ONCE_QUEUE ?? "orders",
  prefix: args.prefix ?? env.ONCE_PREFIX ?? "once:",
  paymentsUrl: args["payments-url"] ?? env.PAYMENTS_URL ?? "http://127.0.0.1:4010",
  concurrency: positive("--concurrency", args.concurrency ?? env.ONCE_CONCURRENCY) ?? 50,
  leaseMs: positive("--lease-ms", args["lease-ms"] ?? env.ONCE_LEASE_MS),
  lockDurationMs: positive("--lock-ms", args["lock-ms"] ?? env.ONCE_LOCK_MS),
  stalledIntervalMs: positive("--stalled-ms", args["stalled-ms"] ?? env.ONCE_STALLED_MS),
  retentionMs: positive("--retention-ms", args["retention-ms"] ?? env.ONCE_RETENTION_MS),
  jobRetry: { attempts, backoff: { type: "exponential" as const, delay: backoffMs } },
  countOutcomes: args["count-outcomes"],
  ...(args["postgres-url"] === undefined
    ? {}
    : { postgres: { url: args["postgres-url"], schema: args.schema ?? "once_orders" } }),
};

// Before the worker exists: once's instruments bind to the providers present when they are made.
const tracing = await startTracing({ serviceName: "once-worker" });
const worker = await startOrderWorker(config).catch(async (error: unknown) => {
  await tracing.shutdown();
  fail(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
});

process.stdout.write(
  `${JSON.stringify({
    type: "ready",
    pid: process.pid,
    queue: config.queue,
    prefix: config.prefix,
    concurrency: config.concurrency,
    tracing: tracing.enabled,
  })}\n`,
);

let stopping = false;
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    // A second signal while draining: stop now, abandoning running calls (their leases will run out).
    const force = stopping;
    stopping = true;
    void worker
      .close(force)
      .then(() => tracing.shutdown())
      .then(
        () => process.exit(0),
        (error: unknown) => fail(`could not stop cleanly: ${String(error)}`),
      );
  });
}
