import { randomInt } from "node:crypto";
import { RedisStore } from "@once/redis";
import type { NodeChild } from "@once/support";
import { Redis } from "ioredis";
import { median, percentile } from "../stats.js";
import { childFailure, startChild } from "./child-process.js";
import { type ChildConfig, orderId, type PeerSide, parseOrderId, taskId } from "./protocol.js";
import type { PeerProvider } from "./provider.js";
import { bullmqDriver, chargeTool } from "./runners/once.js";
import { invokeTask } from "./runners/restate-client.js";
import { type PeerServers, prepareSide } from "./sides.js";

/** What the kill runs found for one side. */
export interface KillFigures {
  kills: number;
  effectsExpected: number;
  effectsMade: number;
  /** Effects beyond the first for one step, summed over the steps. */
  duplicates: number;
  /** Steps with no effect at all. */
  lost: number;
  /** From each SIGKILL to the interrupted step's result in the task's hands, ms (median, p99, all). */
  recoveryMsP50: number;
  recoveryMsP99: number;
  recoveryMs: number[];
  /** Steps per task, and tasks (one kill each). */
  k: number;
  tasks: number;
}

export interface KillSettings {
  /** Tasks to run, each killed once at a random step. */
  tasks: number;
  k: number;
  effectMs: number;
  /**
   * once's lease in these runs, and the BullMQ worker's lock (its stalled check every half of it); 0 keeps
   * every default (the lease, the liveness entry, OnceWorker's lock and stalled check).
   */
  leaseMs: number;
  /** Give up when nothing happens for this long. */
  stallMs: number;
}

/**
 * Sides whose steps run in a process the parent only serves from: Restate's endpoint (the parent calls the
 * ingress) and once's BullMQ worker (the parent dispatches). The others run their tasks in the child.
 */
const SERVED: ReadonlySet<PeerSide> = new Set(["restate", "once-bullmq"]);

/**
 * Runs `settings.tasks` tasks of `settings.k` steps through `side`, one at a time, against the naive
 * provider, and SIGKILLs the process that runs the steps once per task: at a random step, a random moment
 * within the provider's latency after that step's POST arrived (for the transactional step, after its row was
 * written, inside its open transaction). The process is started again at once, with the interrupted task; the
 * engine recovers as it does. Then counts the effects each step made.
 */
export async function runKills(
  servers: PeerServers,
  provider: PeerProvider,
  side: PeerSide,
  settings: KillSettings,
  tag: string,
): Promise<KillFigures> {
  const env = await prepareSide(servers, side, tag);
  const plan = Array.from({ length: settings.tasks }, () => ({
    step: randomInt(settings.k),
    delayMs: Math.random() * settings.effectMs,
  }));
  const killedAt: (number | undefined)[] = [];
  const recovered: (number | undefined)[] = [];
  const runIds: string[] = [];
  let finishedTasks = 0;
  let lastProgress = performance.now();
  let child: NodeChild | undefined;
  let kills = 0;

  const strike = (order: string) => {
    const at = parseOrderId(order);
    if (!at || !order.startsWith(`${tag}-t`)) return;
    const target = plan[at.task];
    if (!target || target.step !== at.step || killedAt[at.task] !== undefined) return;
    killedAt[at.task] = Number.NaN; // armed: one kill per task
    const victim = child;
    setTimeout(() => {
      if (!victim?.alive) return;
      killedAt[at.task] = performance.now();
      kills++;
      void victim.kill("SIGKILL");
    }, target.delayMs);
  };
  const completed = (task: number, step: number) => {
    lastProgress = performance.now();
    const at = killedAt[task];
    if (at === undefined || Number.isNaN(at) || recovered[task] !== undefined || plan[task]?.step !== step)
      return;
    recovered[task] = performance.now() - at;
  };
  const offCharge = provider.onCharge(strike);

  provider.reset();
  const base: ChildConfig = {
    side,
    mode: SERVED.has(side) ? "serve" : "run",
    providerUrl: provider.url,
    effectMs: settings.effectMs,
    runId: tag,
    k: settings.k,
    tasks: settings.tasks,
    concurrency: 1,
    fromTask: 0,
    budgetMs: 0,
    warmUpMs: 0,
    leaseMs: settings.leaseMs,
    ...env.config,
    ...(env.config.bullmq && settings.leaseMs
      ? {
          bullmq: {
            ...env.config.bullmq,
            lockDurationMs: settings.leaseMs,
            stalledIntervalMs: settings.leaseMs / 2,
          },
        }
      : {}),
  };
  const driver = SERVED.has(side) ? await parentDriver(base, completed) : undefined;
  let lives = 0;
  try {
    let driving: Promise<void> | undefined;
    let driverError: unknown;
    for (;;) {
      const config: ChildConfig = {
        ...base,
        fromTask: finishedTasks,
        ...(base.restate ? { restate: { ...base.restate, register: lives === 0 } } : {}),
        ...(base.workflow && runIds[finishedTasks] !== undefined
          ? { workflow: { ...base.workflow, resumeRunId: runIds[finishedTasks] } }
          : {}),
      };
      const life = startChild(config, `peers ${side} kills, life ${++lives}`);
      child = life;
      life.onEvent((event) => {
        if (event.type === "step") completed(event.task as number, event.step as number);
        else if (event.type === "task") finishedTasks = (event.task as number) + 1;
        else if (event.type === "run-id") runIds[event.task as number] = event.runId as string;
        else if (event.type === "effect") strike(event.orderId as string);
      });
      await life
        .waitFor((e) => e.type === "ready" || e.type === "error", { timeoutMs: 120_000 })
        .catch(() => {});
      if (!life.alive && life.events.some((e) => e.type === "error"))
        throw childFailure(life, `${side} failed to start`);
      if (driver && !driving)
        driving = driver
          .run(settings.tasks, (n) => {
            finishedTasks = n + 1;
          })
          .catch((error: unknown) => {
            driverError = error;
          });
      lastProgress = performance.now();
      // Wait for this life to end: killed, done, or stuck.
      for (;;) {
        const ended = await Promise.race([
          life.exited.then(() => "exited" as const),
          (driving ?? new Promise(() => {})).then(() => "driven" as const),
          new Promise<"tick">((resolve) => setTimeout(() => resolve("tick"), 1_000)),
        ]);
        if (ended === "exited" || ended === "driven") break;
        if (performance.now() - lastProgress > settings.stallMs)
          throw new Error(`${side}: no step completed for ${settings.stallMs / 1000} s after ${kills} kills`);
      }
      if (driverError) throw driverError;
      const done = driver ? finishedTasks >= settings.tasks : life.events.some((e) => e.type === "done");
      if (done) {
        await life.stop();
        break;
      }
      if (life.alive) continue;
      const [, signal] = await life.exited;
      if (signal !== "SIGKILL")
        throw childFailure(life, `${side} exited on its own (${signal ?? "no signal"})`);
    }
    const made = env.effects ? await env.effects() : provider.charges(`${tag}-t`);
    let effectsMade = 0;
    let duplicates = 0;
    let lost = 0;
    for (let t = 0; t < settings.tasks; t++) {
      for (let i = 0; i < settings.k; i++) {
        const n = made.get(orderId(taskId(tag, t), i)) ?? 0;
        effectsMade += n;
        duplicates += Math.max(0, n - 1);
        if (n === 0) lost++;
      }
    }
    const recoveryMs = recovered.filter((r): r is number => r !== undefined);
    return {
      kills,
      effectsExpected: settings.tasks * settings.k,
      effectsMade,
      duplicates,
      lost,
      recoveryMsP50: median(recoveryMs),
      recoveryMsP99: percentile(recoveryMs, 99),
      recoveryMs: recoveryMs.map((r) => Math.round(r)),
      k: settings.k,
      tasks: settings.tasks,
    };
  } finally {
    offCharge();
    if (child?.alive) await child.stop();
    await driver?.close();
    await env.cleanup();
  }
}

/**
 * The parent's side of a served side: it runs the tasks one after another, each step's completion reported
 * as it comes, while the child that runs the steps is killed and restarted under it. once on BullMQ: a
 * `Dispatcher` (each step a call). Restate: one ingress call per task; the endpoint reports its steps.
 */
async function parentDriver(
  config: ChildConfig,
  completed: (task: number, step: number) => void,
): Promise<{ run(tasks: number, finished: (n: number) => void): Promise<void>; close(): Promise<void> }> {
  if (config.side === "restate") {
    const restate = config.restate;
    if (!restate) throw new Error("restate: no server settings");
    return {
      async run(tasks, finished) {
        for (let n = 0; n < tasks; n++) {
          await invokeTask(restate.ingressUrl, config.runId, n, config.k);
          finished(n);
        }
      },
      async close() {},
    };
  }
  const redisSettings = config.redis;
  if (!redisSettings) throw new Error("once-bullmq: no Redis settings");
  const redis = new Redis({ host: redisSettings.host, port: redisSettings.port });
  const connection = new Redis({
    host: redisSettings.host,
    port: redisSettings.port,
    maxRetriesPerRequest: null,
  });
  const store = await RedisStore.create({ redis, prefix: redisSettings.prefix, checks: false });
  const dispatch = await bullmqDriver(config, connection, store, chargeTool(config.providerUrl));
  return {
    async run(tasks, finished) {
      for (let n = 0; n < tasks; n++) {
        await dispatch.runTask(n, config.k, completed);
        finished(n);
      }
    },
    async close() {
      await dispatch.close();
      await connection.quit();
      await redis.quit();
    },
  };
}
