import { jobIdForKey } from "@once/bullmq";
import { deriveKey } from "@once/core";
import type { RedisStore } from "@once/redis";
import { type Job, Queue, type QueueOptions, Worker } from "bullmq";
import type { Redis } from "ioredis";
import type { BenchContext, OnceBuild } from "./bench-context.js";
import { interleave } from "./interleave.js";
import { type CpuProfile, profiled } from "./profiler.js";
import { median } from "./stats.js";
import { type Usage, withUsage } from "./usage.js";
import { benchCall, benchEffect, noopEffectTool, RESULT_100, settleKeys, TOOL_NAME } from "./workload.js";

/** One side of the worker comparison: the plain processor, or a build of once running or replaying. */
export interface WorkerSide {
  name: string;
  build?: OnceBuild;
  replay?: boolean;
  /** Give the store's ioredis client `enableAutoPipelining` (commands of one tick go in one write). */
  autoPipelining?: boolean;
  /**
   * The floor: the raw processor plus this many bare `EVALSHA` (a script that returns 1) per job on a
   * connection of their own, one before the effect and one after: what any claim-before / complete-after
   * protocol pays at least (2), or a replay (1).
   */
  floorScripts?: 1 | 2;
}

export interface SideFigures {
  /** Median jobs per second over the rounds. */
  jobsPerSec: number;
  /** Median over the rounds of this side's jobs/s over the first side's (raw) in the same round. */
  ratioToFirst: number;
  /** Median CPU time per job: this Node process (BullMQ and once), and the Redis server. */
  nodeCpuUsPerJob: number;
  redisCpuUsPerJob: number;
  /** Median event-loop utilisation while the side ran. */
  eventLoop: number;
  rounds: number[];
}

export interface WorkerComparison {
  concurrency: number;
  jobs: number;
  /** How long each job's effect waits, in ms (0: a no-op). */
  effectMs: number;
  sides: Record<string, SideFigures>;
}

const JOB_OPTIONS = { removeOnComplete: true, removeOnFail: true } as const;
// Numbers every run of every comparison: queue names, task ids and so keys are never reused, so a side never
// finds another comparison's records (a first run that replays, a replay whose seeding finds one done).
let serial = 0;

/**
 * The same N no-op jobs through a plain BullMQ worker and through once's processor (every job run, or every
 * job replayed from a done record), sides interleaved round by round. The queue is filled before the worker
 * starts; the clock runs from `worker.run()` to the N-th `completed` event.
 */
export async function compareWorkers(
  ctx: BenchContext,
  settings: {
    sides: readonly WorkerSide[];
    concurrency: number;
    jobs: number;
    rounds: number;
    /** Each job's effect waits this long, on every side (default 0: a no-op). */
    effectMs?: number;
    /** BullMQ's own telemetry (e.g. bullmq-otel) for every side's queue and worker. */
    telemetry?: QueueOptions["telemetry"];
    /** Profile every timed run and hand each profile here (warm-up passes are not profiled). */
    onProfile?: (side: string, jobs: number, profile: CpuProfile, usage: Usage) => void;
  },
): Promise<WorkerComparison> {
  const { concurrency, jobs, rounds } = settings;
  const effectMs = settings.effectMs ?? 0;
  const tool = noopEffectTool(RESULT_100, effectMs);
  const effect = benchEffect(effectMs);
  const telemetry = settings.telemetry === undefined ? {} : { telemetry: settings.telemetry };
  const resultText = JSON.stringify(RESULT_100);
  const stores = new Map<string, { store: RedisStore; close(): Promise<unknown> }>();
  const storeFor = async (side: WorkerSide): Promise<RedisStore | undefined> => {
    if (!side.build) return undefined;
    const id = `${ctx.builds.indexOf(side.build)}${side.autoPipelining ? "p" : ""}`;
    let entry = stores.get(id);
    if (!entry) {
      const redis = ctx.target.connect({ autoPipelining: side.autoPipelining === true });
      const store = await side.build.RedisStore.create({
        redis: redis as never,
        prefix: `${ctx.prefix}w${id}:`,
        checks: false,
      });
      entry = { store, close: () => redis.quit() };
      stores.set(id, entry);
    }
    return entry.store;
  };
  const queueConnection = ctx.target.connect({ forWorker: true });
  // The floor's connection, as once's store has its own.
  const floorConnection = ctx.target.connect();
  const floorSha = String(await floorConnection.script("LOAD", "return 1"));
  const bullPrefix = `${ctx.prefix}bull`;

  const runSide = async (
    side: WorkerSide,
    jobs: number,
    timed = true,
  ): Promise<{ jobsPerSec: number; usage: Usage }> => {
    const id = serial++;
    const queueName = `c${concurrency}-${id}`;
    const taskId = `${ctx.prefix}${queueName}`;
    const queue = new Queue(queueName, { connection: queueConnection, prefix: bullPrefix, ...telemetry });
    const calls = Array.from({ length: jobs }, (_, i) => {
      const data = benchCall(queueName, taskId, i);
      const key = deriveKey({ namespace: "bench", taskId, stepId: String(i) });
      return { data, key };
    });
    const onceStore = await storeFor(side);
    if (side.replay && onceStore) {
      // Every key already done, as a retry after the first run finds it. Untimed.
      await settleKeys(
        onceStore,
        calls.map(({ key }) => key),
        resultText,
      );
    }
    for (let i = 0; i < calls.length; i += 1_000) {
      await queue.addBulk(
        calls.slice(i, i + 1_000).map(({ data, key }) => ({
          name: TOOL_NAME,
          data,
          opts: { ...JOB_OPTIONS, jobId: jobIdForKey(key) },
        })),
      );
    }

    const processor =
      side.build && onceStore
        ? side.build.createCallProcessor({ store: onceStore, tools: [tool] })
        : side.floorScripts
          ? floorProcessor(floorConnection, floorSha, side.floorScripts, effect)
          : async (_job: Job) => effect();
    const connection = ctx.target.connect({ forWorker: true });
    const worker = new Worker(queueName, processor, {
      connection,
      prefix: bullPrefix,
      concurrency,
      autorun: false,
      ...telemetry,
    });
    let completed = 0;
    let failure: Error | undefined;
    const finished = new Promise<void>((resolve, reject) => {
      worker.on("completed", () => {
        if (++completed === jobs) resolve();
      });
      worker.on("failed", (_job, error) => {
        failure ??= error;
        reject(error);
      });
    });
    await worker.waitUntilReady();
    let profile: CpuProfile | undefined;
    try {
      const { usage } = await withUsage(ctx.probe, () =>
        profiled(
          ctx.options.profileDir,
          `${side.name}-c${concurrency}-${id}`,
          async () => {
            void worker.run();
            await finished;
          },
          timed && settings.onProfile
            ? (p) => {
                profile = p;
              }
            : undefined,
        ),
      );
      if (profile) settings.onProfile?.(side.name, jobs, profile, usage);
      return { jobsPerSec: jobs / usage.seconds, usage };
    } catch (error) {
      throw new Error(`${side.name}: a job failed: ${failure?.message ?? error}`, { cause: error });
    } finally {
      await worker.close();
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close();
      await connection.quit();
    }
  };

  try {
    // One small untimed pass per side warms the JIT, the scripts and the connections.
    for (const side of settings.sides) await runSide(side, Math.min(jobs, 1_000), false);
    const names = settings.sides.map((s) => s.name);
    const bySide = new Map(settings.sides.map((s) => [s.name, s]));
    const results = await interleave(names, rounds, (name) => runSide(bySide.get(name) as WorkerSide, jobs));
    const sides: Record<string, SideFigures> = {};
    const first = results[names[0] as string] ?? [];
    for (const name of names) {
      const list = results[name] ?? [];
      sides[name] = {
        jobsPerSec: median(list.map((r) => r.jobsPerSec)),
        ratioToFirst: median(list.map((r, i) => r.jobsPerSec / (first[i]?.jobsPerSec ?? Number.NaN))),
        nodeCpuUsPerJob: median(list.map((r) => (r.usage.nodeCpu * r.usage.seconds * 1e6) / jobs)),
        redisCpuUsPerJob: median(list.map((r) => (r.usage.redisCpu * r.usage.seconds * 1e6) / jobs)),
        eventLoop: median(list.map((r) => r.usage.eventLoop)),
        rounds: list.map((r) => r.jobsPerSec),
      };
    }
    return { concurrency, jobs, effectMs, sides };
  } finally {
    await queueConnection.quit();
    await floorConnection.quit();
    for (const { close } of stores.values()) await close();
  }
}

/** The raw processor with `scripts` bare EVALSHA on the job's key: one before its effect, one after. */
function floorProcessor(redis: Redis, sha: string, scripts: 1 | 2, effect: () => unknown) {
  return async (job: Job) => {
    await redis.evalsha(sha, 1, job.id as string);
    const result = await effect();
    if (scripts === 2) await redis.evalsha(sha, 1, job.id as string);
    return result;
  };
}
