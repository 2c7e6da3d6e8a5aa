// A chaos worker process: `node --import tsx chaos/chaos-worker.ts` with its settings as JSON in
// CHAOS_WORKER_CONFIG. It runs the chaos tools through once (createCallProcessor in a plain BullMQ worker)
// against Redis reached through the suite's TCP proxies (one server, Sentinel's primary, or a Cluster), and prints one JSON line per thing the suite counts:
// every store transition Redis acknowledged, every request sent to the provider, every failed attempt.
//
// The suite SIGKILLs it, freezes it with SIGSTOP, cuts its connections; it exits on SIGTERM and when its
// stdin closes (the suite is gone).

import { createCallProcessor } from "@once/bullmq";
import { LeaseLostError } from "@once/core";
import { type Job, Worker } from "bullmq";
import { CHAOS_WORKER_CONFIG_ENV, chaosWorkerConfig } from "./chaos-config.js";
import { openChaosStore } from "./chaos-store.js";
import { chaosTools } from "./chaos-tools.js";
import { connectRedis } from "./redis-target.js";
import { reportingStore } from "./reporting-store.js";

const config = chaosWorkerConfig.parse(JSON.parse(process.env[CHAOS_WORKER_CONFIG_ENV] ?? "null"));

function emit(event: string, fields: Record<string, unknown> = {}): void {
  // Synchronous on a pipe: the line is out before a SIGKILL or SIGSTOP can land after it. When the suite
  // reads slowly, a full pipe blocks this process: reported, since it is a stall the harness itself causes.
  const t = Date.now();
  process.stdout.write(`${JSON.stringify({ e: event, at: t, ...fields })}\n`);
  const took = Date.now() - t;
  if (took > 50) process.stdout.write(`${JSON.stringify({ e: "slow-stdout", at: t, took, after: event })}\n`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// BullMQ's connection blocks and must retry forever; the store's fails fast and the store fails closed.
const bullRedis = connectRedis(config.redis, { maxRetriesPerRequest: null });
const storeRedis = connectRedis(config.redis, { maxRetriesPerRequest: 1, connectTimeout: 2_000 });
for (const client of [bullRedis, storeRedis]) client.on("error", () => {});

// Started while Redis (or the store's PostgreSQL) may be restarting, or a new primary may have no replica yet
// (durability refuses to start without one): keep trying.
let opened: Awaited<ReturnType<typeof openChaosStore>> | undefined;
while (opened === undefined) {
  try {
    opened = await openChaosStore(config.store, {
      redis: storeRedis,
      prefix: config.storePrefix,
      timeoutMs: config.storeTimeoutMs,
      ...(config.durability === undefined ? {} : { durability: config.durability }),
      poolSize: config.concurrency + 2,
    });
  } catch (error) {
    emit("store-retry", { error: String(error) });
    await sleep(250);
  }
}
const storeOpened = opened;

const store = reportingStore(storeOpened.store, (entry) => emit("s", entry));
const tools = chaosTools({
  paymentsUrl: config.paymentsUrl,
  transport: config.transport,
  leaseMs: config.leaseMs,
  providerTimeoutMs: config.providerTimeoutMs,
  probe: {
    // Called once the request is on its way: a write to stdout never stands between the check and the send.
    sending: (ctx, checkedAt) => emit("send", { k: ctx.key, f: ctx.fence, checkedAt }),
    applied: (ctx, id) => emit("applied", { k: ctx.key, f: ctx.fence, id }),
    reconciled: (ctx, found) => emit("reconciled", { k: ctx.key, f: ctx.fence, found }),
  },
});
const processCall = createCallProcessor({ store, tools: tools.all, leaseMs: config.leaseMs });

const worker = new Worker(
  config.queueName,
  async function processAndReport(job: Job, token?: string) {
    emit("start", { job: job.id, a: job.attemptsMade });
    try {
      return await processCall(job, token);
    } catch (error) {
      const err = error as Error & { cause?: unknown };
      // DelayedError is the in-flight wait, not a failure.
      if (err.name !== "DelayedError") {
        const cause = err.cause instanceof Error ? err.cause.name : undefined;
        // A lost lease names its key and token: the suite checks whether that owner had reached the provider.
        const owner =
          error instanceof LeaseLostError ? { k: error.key, f: Number(error.token.split(".")[0]) } : {};
        emit("failed", {
          job: job.id,
          name: err.name,
          ...owner,
          ...(cause ? { cause } : {}),
          msg: err.message.slice(0, 160),
        });
      }
      throw error;
    }
  },
  {
    connection: bullRedis,
    prefix: config.queuePrefix,
    concurrency: config.concurrency,
    lockDuration: config.lockDurationMs,
    stalledInterval: config.stalledIntervalMs,
    // SIGKILLs, SIGSTOPs and a Redis restart stall jobs again and again; once keeps every re-run safe.
    maxStalledCount: 1_000,
  },
);
worker.on("error", (error: Error) => emit("worker-error", { msg: error.message.slice(0, 160) }));
worker.on("stalled", (jobId: string) => emit("stalled", { job: jobId }));

let closing = false;
async function shutdown(): Promise<void> {
  if (closing) return;
  closing = true;
  await Promise.race([worker.close(true), sleep(3_000)]).catch(() => {});
  bullRedis.disconnect();
  storeRedis.disconnect();
  await Promise.race([storeOpened.close(), sleep(1_000)]).catch(() => {});
  emit("closed");
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown());
process.stdin.on("end", () => void shutdown());
process.stdin.resume();

await worker.waitUntilReady();
emit("ready", { name: config.name, pid: process.pid });
