import { setTimeout as sleep } from "node:timers/promises";
import { type CallData, jobIdForKey, OnceWorker } from "@once/bullmq";
import { DEFAULT_NAMESPACE, defineTool, deriveKey, type OnceStore } from "@once/core";
import { wrapStore } from "@once/core/store-kit";
import { InProcess } from "@once/engine";
import { RedisStore } from "@once/redis";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { z } from "zod";
import type { BenchContext } from "./bench-context.js";
import { type KillFigures, runKills } from "./peers/kills.js";
import { startPeerProvider } from "./peers/provider.js";
import { peerServers } from "./peers/sides.js";
import { compareResume } from "./resume.js";
import { commandCalls, commandDelta, redisCpuSeconds } from "./server-stats.js";
import { round } from "./stats.js";

/**
 * How soon once recovers a call whose owner was SIGKILLed mid-effect, at the default settings (a 30 s lease,
 * a 1 s liveness entry, OnceWorker's 3 s lock and 1 s stalled check), and what those settings cost.
 */
export interface RecoveryFigures {
  /** In process: the task's loop (InProcess, the engine an agent loop runs on) SIGKILLed, a new process resumes it. */
  killToCompleteMsP50: number;
  killToCompleteMsP99: number;
  /** Through BullMQ: the worker SIGKILLed, BullMQ hands the stalled job to a new worker. */
  workerKillToCompleteMsP50: number;
  workerKillToCompleteMsP99: number;
  /** Liveness renewals per second of one process holding `callsInFlight` claims. */
  heartbeatsPerSecPerProcess: number;
  /** The same process's per-call lease heartbeats per second (a third of the 30 s lease each). */
  leaseHeartbeatsPerSec: number;
  callsInFlight: number;
  /** A 1,000-turn agent task resumed, every turn replayed: median ms and the commands it sent. */
  resume1000TurnsMs: number;
  resume1000TurnsRoundTrips: number;
  /** One worker process's load on Redis (its queue and its store), idle and with one job held. */
  workerCommandsPerSec: Record<WorkerSettingsName, { idle: WorkerLoad; oneJob: WorkerLoad }>;
  /** Every kill run as the peers section reports one. */
  inProcess: KillFigures;
  worker: KillFigures;
}

type WorkerSettingsName = "OnceWorker defaults" | "BullMQ defaults";

/** Per second: commands Redis ran (those inside scripts included), the scripts among the calls, Redis CPU ms. */
export interface WorkerLoad {
  commands: number;
  scripts: number;
  redisCpuMs: number;
}

/** What BullMQ's own Worker uses when not told: lockDuration and stalledInterval 30 s. */
const BULLMQ_DEFAULTS = { lockDuration: 30_000, stalledInterval: 30_000 };

export async function measureRecovery(
  ctx: BenchContext,
  options: { kills: number; effectMs: number },
): Promise<RecoveryFigures> {
  const servers = peerServers(ctx, "");
  const provider = await startPeerProvider(options.effectMs);
  const kill = (side: "once-redis" | "once-bullmq") =>
    runKills(
      servers,
      provider,
      side,
      // leaseMs 0: the side's defaults, the lease and the worker's lock included.
      { tasks: options.kills, k: 10, effectMs: options.effectMs, leaseMs: 0, stallMs: 90_000 },
      `r${Date.now().toString(36)}${side === "once-redis" ? "i" : "w"}`,
    );
  try {
    ctx.log(`recovery: ${options.kills} SIGKILLs mid-effect in process, default settings`);
    const inProcess = await kill("once-redis");
    logKills(ctx, "in process", inProcess);
    ctx.log(`recovery: ${options.kills} SIGKILLs mid-effect of a BullMQ worker, default settings`);
    const worker = await kill("once-bullmq");
    logKills(ctx, "worker", worker);
    const beats = await countHeartbeats(ctx, 50);
    ctx.log(
      `recovery: ${beats.callsInFlight} calls in flight: ${beats.liveness} liveness renewals/s, ${beats.lease} lease heartbeats/s`,
    );
    const workerCommandsPerSec = await workerCommands(ctx);
    const [resume] = await compareResume(ctx, { turns: [1_000], rounds: 5 });
    const oneRead = resume?.sides["one read"];
    if (!oneRead) throw new Error("recovery: the resume was not measured");
    return {
      killToCompleteMsP50: inProcess.recoveryMsP50,
      killToCompleteMsP99: inProcess.recoveryMsP99,
      workerKillToCompleteMsP50: worker.recoveryMsP50,
      workerKillToCompleteMsP99: worker.recoveryMsP99,
      heartbeatsPerSecPerProcess: beats.liveness,
      leaseHeartbeatsPerSec: beats.lease,
      callsInFlight: beats.callsInFlight,
      resume1000TurnsMs: oneRead.ms,
      resume1000TurnsRoundTrips: oneRead.commands,
      workerCommandsPerSec,
      inProcess,
      worker,
    };
  } finally {
    await provider.close();
  }
}

function logKills(ctx: BenchContext, where: string, figures: KillFigures): void {
  ctx.log(
    `recovery: ${where}: ${figures.kills} kills, ${figures.duplicates} duplicates, ${figures.lost} lost, ` +
      `kill to completion p50 ${Math.round(figures.recoveryMsP50)} ms, p99 ${Math.round(figures.recoveryMsP99)} ms`,
  );
}

/** An effect that holds its claim until `release` is called: a call in flight for as long as we need one. */
function holdingTool() {
  const waiting = new Set<() => void>();
  const tool = defineTool({
    name: "hold",
    kind: "effect",
    input: z.object({ n: z.number().int() }),
    output: z.object({ n: z.number().int() }),
    run: ({ n }) => new Promise<{ n: number }>((resolve) => waiting.add(() => resolve({ n }))),
  });
  return {
    tool,
    release() {
      for (const resolve of waiting) resolve();
      waiting.clear();
    },
  };
}

/** Counts a store's liveness renewals and lease heartbeats (the store itself is the real RedisStore). */
function countingStore(store: RedisStore): { store: OnceStore; counts: { liveness: number; lease: number } } {
  const counts = { liveness: 0, lease: 0 };
  const counted = wrapStore(store, {
    renewLiveness: (id: string, ttlMs: number) => {
      counts.liveness++;
      return store.renewLiveness(id, ttlMs);
    },
    heartbeat: (key: string, token: string, leaseMs: number) => {
      counts.lease++;
      return store.heartbeat(key, token, leaseMs);
    },
  });
  return { store: counted, counts };
}

/** One process with `callsInFlight` effect calls held for 12 s: its store writes per second while they wait. */
async function countHeartbeats(
  ctx: BenchContext,
  callsInFlight: number,
): Promise<{ callsInFlight: number; liveness: number; lease: number }> {
  const redis = ctx.target.connect();
  const store = await RedisStore.create({ redis, prefix: `${ctx.prefix}beats:`, checks: false });
  const { store: counted, counts } = countingStore(store);
  const { tool, release } = holdingTool();
  const engine = new InProcess({ store: counted, tools: [tool] });
  try {
    const calls = Array.from({ length: callsInFlight }, (_, n) =>
      engine.call(tool, { n }, { taskId: "beats", stepId: String(n) }),
    );
    await sleep(1_000); // every claim granted and its timers set
    const before = { ...counts };
    const windowMs = 12_000;
    await sleep(windowMs);
    const perSec = (now: number, then: number) => round(((now - then) * 1000) / windowMs, 2);
    const figures = {
      callsInFlight,
      liveness: perSec(counts.liveness, before.liveness),
      lease: perSec(counts.lease, before.lease),
    };
    release();
    await Promise.all(calls);
    return figures;
  } finally {
    release();
    await redis.quit();
  }
}

/**
 * One OnceWorker's load on Redis per second, at OnceWorker's defaults and at BullMQ's: idle for 10 s, then
 * with one job held for 10 s. Read off the server (commandstats and its CPU), so it counts BullMQ's blocking
 * reads, lock renewals and stalled checks, and once's store writes for the held call (the same on both sides).
 */
async function workerCommands(ctx: BenchContext): Promise<RecoveryFigures["workerCommandsPerSec"]> {
  const out = {} as RecoveryFigures["workerCommandsPerSec"];
  if (!ctx.target.dedicated)
    ctx.log("recovery: the worker's commands are read off a shared Redis: other clients' count too");
  for (const [name, workerOptions] of [
    ["OnceWorker defaults", {}],
    ["BullMQ defaults", BULLMQ_DEFAULTS],
  ] as const) {
    const queueName = `recovery-${name === "BullMQ defaults" ? "bullmq" : "once"}`;
    const prefix = `${ctx.prefix}bull`;
    const connection = new Redis({
      host: ctx.target.host,
      port: ctx.target.port,
      maxRetriesPerRequest: null,
    });
    const redis = ctx.target.connect();
    const store = await RedisStore.create({ redis, prefix: `${ctx.prefix}wc:${queueName}:`, checks: false });
    const { tool, release } = holdingTool();
    const queue = new Queue(queueName, { connection, prefix });
    const worker = await OnceWorker.create({
      queueName,
      connection,
      store,
      tools: [tool],
      workerOptions: { prefix, ...workerOptions },
    });
    const windowMs = 10_000;
    const rate = async (): Promise<WorkerLoad> => {
      const before = await commandCalls(ctx.probe);
      const cpuBefore = await redisCpuSeconds(ctx.probe);
      await sleep(windowMs);
      const cpu = (await redisCpuSeconds(ctx.probe)) - cpuBefore;
      const delta = commandDelta(before, await commandCalls(ctx.probe));
      const sum = (names: (name: string) => boolean) =>
        [...delta].filter(([name]) => names(name)).reduce((total, [, calls]) => total + calls, 0);
      const perSec = (n: number) => round((n * 1000) / windowMs, 1);
      return {
        commands: perSec(sum(() => true)),
        scripts: perSec(sum((name) => SCRIPT_CALLS.has(name))),
        redisCpuMs: perSec(cpu * 1000),
      };
    };
    try {
      await sleep(1_000);
      const idle = await rate();
      // The job as a Dispatcher enqueues it, without the dispatcher's own wait for its result.
      const call: CallData = {
        v: 2,
        kind: "effect",
        tool: "hold",
        namespace: DEFAULT_NAMESPACE,
        taskId: queueName,
        stepId: "1",
        input: { n: 1 },
        callId: "recovery",
      };
      await queue.add("hold", call, { jobId: jobIdForKey(deriveKey({ taskId: queueName, stepId: "1" })) });
      await sleep(1_000);
      const oneJob = await rate();
      out[name] = { idle, oneJob };
      ctx.log(
        `recovery: worker at ${name}: idle ${idle.commands} commands/s (${idle.scripts} scripts), ` +
          `one job held ${oneJob.commands} (${oneJob.scripts})`,
      );
    } finally {
      release();
      await worker.close();
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close();
      await connection.quit();
      await redis.quit();
    }
  }
  return out;
}

/** The calls that run a script: each one round trip, its commands counted under their own names. */
const SCRIPT_CALLS = new Set(["evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro"]);
