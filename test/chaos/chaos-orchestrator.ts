// The chaos orchestrator process: `node --import tsx chaos/chaos-orchestrator.ts`, settings as JSON in
// CHAOS_ORCHESTRATOR_CONFIG. It writes its plan (every task id and step id) to a file before the first
// dispatch; killed and started again, it reads the plan back and re-dispatches every call not yet written to
// its progress journal with the same step ids, so the same keys.
//
// Every call is driven to an end the caller can act on: `done` (a result), `failed` (a stored terminal
// failure) or `unknown` (a tool without a reconcile hook whose outcome was lost). Anything else — a dispatch
// timeout (the timeouts are aggressive on purpose), a failed job, Redis away — is retried with the same key.

import { appendFileSync, existsSync } from "node:fs";
import { Dispatcher, DispatchTimeoutError } from "@once/bullmq";
import {
  type AnyTool,
  deriveKey,
  IdempotencyConflictError,
  OutcomeUnknownError,
  ReplayedFailureError,
} from "@once/core";
import { Queue } from "bullmq";
import { CHAOS_ORCHESTRATOR_CONFIG_ENV, chaosOrchestratorConfig } from "./chaos-config.js";
import { loadOrWritePlan, type PlannedCall, readProgress, type SettledCall } from "./chaos-plan.js";
import { openChaosStore } from "./chaos-store.js";
import { chaosTools, RECONCILING_TOOLS } from "./chaos-tools.js";
import { connectRedis } from "./redis-target.js";

const config = chaosOrchestratorConfig.parse(
  JSON.parse(process.env[CHAOS_ORCHESTRATOR_CONFIG_ENV] ?? "null"),
);

function emit(event: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(`${JSON.stringify({ e: event, at: Date.now(), ...fields })}\n`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// The suite holds our stdin open; its end means the suite is gone.
process.stdin.on("end", () => process.exit(1));
process.stdin.resume();

const { plan, resumed } = loadOrWritePlan(config.planFile, config.seed, config.calls);
// A SIGKILL may have torn the last line: end it, so the next entry starts on a line of its own.
if (resumed && existsSync(config.progressFile)) appendFileSync(config.progressFile, "\n");
const settled = readProgress(config.progressFile);
emit(resumed ? "plan-loaded" : "plan-written", { calls: plan.calls.length, settled: settled.size });

const redis = connectRedis(config.redis, { maxRetriesPerRequest: null });
redis.on("error", () => {});
const queue = new Queue(config.queueName, { connection: redis, prefix: config.queuePrefix });
queue.on("error", () => {});

async function retrying<T>(what: string, make: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await make();
    } catch (error) {
      emit("setup-retry", { what, error: String(error).slice(0, 160) });
      await sleep(250);
    }
  }
}

// The dispatcher only reads records (the workers write them): its store needs no durability.
const { store } = await retrying("store", () =>
  openChaosStore(config.store, { redis, prefix: config.storePrefix, timeoutMs: 2_000, poolSize: 8 }),
);
// The orchestrator never runs a tool: the URL only satisfies the declarations.
const tools = chaosTools({ paymentsUrl: "http://127.0.0.1:9" });
const byName = new Map<string, AnyTool>(tools.all.map((tool) => [tool.name, tool]));
const dispatcher = await retrying("dispatcher", () =>
  Dispatcher.create({
    queue,
    store,
    tools: tools.all,
    timeoutMs: config.timeoutMs,
    retries: config.retries,
    jobOptions: {
      attempts: config.jobAttempts,
      backoff: { type: "exponential", delay: config.jobBackoffMs },
      // Finished jobs go away, so a late re-enqueue is a fresh job: the store, not BullMQ, must dedup it.
      removeOnComplete: true,
      removeOnFail: true,
    },
    worker: {
      leaseMs: config.leaseMs,
      lockDurationMs: config.lockDurationMs,
      stalledIntervalMs: config.stalledIntervalMs,
    },
    resumeGapMs: 60_000,
  }),
);

function settle(fields: Omit<SettledCall, "at">): void {
  const entry = { ...fields, at: Date.now() };
  settled.set(entry.i, entry);
  appendFileSync(config.progressFile, `${JSON.stringify(entry)}\n`);
}

/** Drives one call to an end, with the same step id (so the same key) on every try. */
async function drive(call: PlannedCall): Promise<void> {
  const tool = byName.get(call.tool);
  if (!tool) throw new Error(`no tool ${call.tool}`);
  const step = { taskId: call.taskId, stepId: call.stepId };
  for (let attempt = 1; ; attempt++) {
    try {
      const answer = await dispatcher.call(tool, call.input as never, step);
      if (answer.enqueues > 1) emit("timeout", { i: call.i, n: answer.enqueues - 1 });
      const result = answer.result as { id: string };
      settle({ i: call.i, end: "done", id: result.id, replayed: answer.replayed });
      return;
    } catch (error) {
      if (error instanceof DispatchTimeoutError) {
        emit("timeout", { i: call.i, n: error.attempts });
        continue;
      }
      if (error instanceof ReplayedFailureError) {
        settle({ i: call.i, end: "failed" });
        return;
      }
      if (error instanceof IdempotencyConflictError) {
        // Never expected: the plan gives every step one input. Recorded so the suite reports it.
        settle({ i: call.i, end: "conflict" });
        return;
      }
      if (error instanceof OutcomeUnknownError && !RECONCILING_TOOLS.has(call.tool)) {
        const record = await store.get(deriveKey(step)).catch(() => undefined);
        if (record?.state === "unknown") {
          settle({ i: call.i, end: "unknown" });
          return;
        }
      }
      // A failed job (its attempts ran out while Redis was away), the store unreachable, an unknown outcome
      // a reconcile hook will settle: ask again, same key.
      emit("retry", {
        i: call.i,
        name: (error as Error).name,
        msg: String((error as Error).message).slice(0, 120),
      });
      await sleep(Math.min(2_000, 100 * attempt));
    }
  }
}

const pending = plan.calls.filter((call) => !settled.has(call.i));
const startedAt = Date.now();
let inFlight = 0;
let next = 0;
await new Promise<void>((resolve) => {
  const launch = () => {
    // Paced, so that the suite's faults fall across the whole run instead of after a burst.
    const due = Math.floor(((Date.now() - startedAt) / 1_000) * config.rate) + 1;
    while (next < pending.length && next < due && inFlight < config.concurrency) {
      const call = pending[next++] as PlannedCall;
      inFlight += 1;
      void drive(call)
        .catch((error: unknown) => emit("drive-crashed", { i: call.i, error: String(error) }))
        .finally(() => {
          inFlight -= 1;
          if (next >= pending.length && inFlight === 0) resolve();
        });
    }
    if (next < pending.length) setTimeout(launch, 20);
    else if (inFlight === 0) resolve();
  };
  launch();
});

// The drain's last pass, once the faults are over: every step's record must have ended. A worker thawed from
// SIGSTOP may still run a job it no longer holds and re-open a step that had ended `unknown` (a claim
// grants `unknown → reconciling`); if it then fails, the step is left `reconciling` with nobody coming
// back. Such a step is driven again with its own key. A missing record is only reported: its call has its
// answer, and running it again would repeat the effect.
while (!existsSync(config.faultsOverFile)) await sleep(200);
await sleep(2_000);
for (let pass = 1; pass <= 10; pass++) {
  const reopened: PlannedCall[] = [];
  let missing = 0;
  for (const call of plan.calls) {
    const record = await retrying("audit", () =>
      store.get(deriveKey({ taskId: call.taskId, stepId: call.stepId })),
    );
    if (record === undefined) missing += 1;
    else if (record.state !== "done" && record.state !== "failed" && record.state !== "unknown") {
      emit("reopened", { i: call.i, state: record.state, fence: record.fence, pass });
      reopened.push(call);
    }
  }
  emit("audit", { pass, reopened: reopened.length, missing });
  if (reopened.length === 0) break;
  await Promise.all(reopened.map((call) => drive(call)));
}

const ends: Record<string, number> = {};
for (const entry of settled.values()) ends[entry.end] = (ends[entry.end] ?? 0) + 1;
emit("finished", { settled: settled.size, ends });
await dispatcher.close().catch(() => {});
await queue.close().catch(() => {});
redis.disconnect();
process.exit(0);
