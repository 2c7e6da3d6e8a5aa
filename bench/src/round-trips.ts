import { jobIdForKey } from "@once/bullmq";
import { deriveKey, fingerprint, type OnceStore } from "@once/core";
import type { RedisStore } from "@once/redis";
import { type Job, Queue, Worker } from "bullmq";
import type { Redis } from "ioredis";
import type { BenchContext } from "./bench-context.js";
import { countSentCommands } from "./sent-commands.js";
import { commandCalls, commandDelta } from "./server-stats.js";
import { round } from "./stats.js";
import { benchCall, INPUT, noopEffectTool, RESULT_100, TOOL_NAME } from "./workload.js";

export const OUTCOMES = ["acquired", "replay", "in_flight", "reconcile"] as const;
export type Outcome = (typeof OUTCOMES)[number];

/** Per job, from one measured batch. */
export interface CommandCount {
  /** Commands clients wrote to Redis (each script call is one). */
  roundTrips: number;
  /** Commands Redis ran, INFO commandstats delta: script calls plus every redis.call inside them. */
  commands: number;
  /** EVALSHA + EVAL in the commandstats delta. */
  scripts: number;
  /** The commandstats delta per command name. */
  byCommand: Record<string, number>;
}

export interface OutcomeCommands {
  /** once's store alone (the same store calls a worker makes, no BullMQ). */
  store: CommandCount;
  /** A BullMQ worker running once's processor: once's calls and BullMQ's own. */
  worker: CommandCount;
}

export interface RoundTrips {
  jobs: number;
  /** A plain BullMQ worker with a no-op processor, for reference. */
  raw: CommandCount;
  outcomes: Record<Outcome, OutcomeCommands>;
}

/**
 * Commands per job for each claim outcome, counted from INFO commandstats deltas on the bench's Redis while
 * exactly that work runs, plus the commands clients sent (the round trips). Needs a server nobody else uses
 * for the deltas to be the bench's alone.
 */
export async function countRoundTrips(ctx: BenchContext, jobs = 1_000): Promise<RoundTrips> {
  const build = ctx.builds[0];
  if (!build) throw new Error("no build");
  const storeClient = ctx.target.connect();
  const queueClient = ctx.target.connect({ forWorker: true });
  const store = await build.RedisStore.create({
    redis: storeClient as never,
    prefix: `${ctx.prefix}rt:`,
    checks: false,
  });
  const sent = countSentCommands();
  const print = fingerprint(TOOL_NAME, INPUT);
  const resultText = JSON.stringify(RESULT_100);
  const bullPrefix = `${ctx.prefix}rtbull`;
  let serial = 0;

  const keysFor = (taskId: string) =>
    Array.from({ length: jobs }, (_, i) => deriveKey({ namespace: "bench", taskId, stepId: String(i) }));

  /** Brings each key to the state the outcome needs. Untimed and uncounted. */
  const seed = async (outcome: Outcome, keys: string[]) => {
    const other = await build.RedisStore.create({
      redis: storeClient as never,
      prefix: `${ctx.prefix}rt:`,
      checks: false,
    });
    for (let i = 0; i < keys.length; i += 200) {
      await Promise.all(
        keys.slice(i, i + 200).map(async (key) => {
          if (outcome === "acquired") return;
          const claim = await other.claim({
            key,
            fingerprint: print,
            tool: TOOL_NAME,
            phase: "effect",
            leaseMs: 120_000,
          });
          if (claim.outcome !== "acquired") throw new Error(`seeding ${key}: ${claim.outcome}`);
          if (outcome === "replay") await other.complete(key, claim.token, resultText);
          if (outcome === "reconcile") await other.markUnknown(key, claim.token);
          // in_flight: leave it claimed by that other owner, its lease alive.
        }),
      );
    }
  };

  /** What a worker's store calls are for one key and outcome, without BullMQ. */
  const storeCalls = async (s: OnceStore, outcome: Outcome, key: string) => {
    const claim = await s.claim({
      key,
      fingerprint: print,
      tool: TOOL_NAME,
      phase: "effect",
      leaseMs: 30_000,
    });
    if (claim.outcome !== outcome) throw new Error(`expected ${outcome}, got ${claim.outcome}`);
    if (claim.outcome === "acquired") await s.complete(key, claim.token, resultText);
    if (claim.outcome === "reconcile") await s.resolveApplied(key, claim.token, resultText);
  };

  const measure = async (run: () => Promise<void>, onceClient: Redis | undefined): Promise<CommandCount> => {
    sent.take();
    const before = await commandCalls(ctx.probe);
    await run();
    const after = await commandCalls(ctx.probe);
    const delta = commandDelta(before, after);
    let roundTrips = 0;
    for (const [client, byName] of sent.take()) {
      if (client === ctx.probe) continue;
      if (onceClient !== undefined && client !== onceClient) continue;
      for (const n of byName.values()) roundTrips += n;
    }
    const total = [...delta.values()].reduce((a, b) => a + b, 0);
    return {
      roundTrips: round(roundTrips / jobs),
      commands: round(total / jobs),
      scripts: round(((delta.get("evalsha") ?? 0) + (delta.get("eval") ?? 0)) / jobs),
      byCommand: Object.fromEntries(
        [...delta].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, round(v / jobs)]),
      ),
    };
  };

  const runWorker = async (outcome: Outcome | "raw"): Promise<CommandCount> => {
    const queueName = `rt-${outcome.replace("_", "-")}-${serial++}`;
    const taskId = `${ctx.prefix}${queueName}`;
    const keys = keysFor(taskId);
    if (outcome !== "raw") await seed(outcome, keys);
    const queue = new Queue(queueName, { connection: queueClient, prefix: bullPrefix });
    await queue.addBulk(
      keys.map((key, i) => {
        const data = benchCall(queueName, taskId, i);
        return {
          name: TOOL_NAME,
          data,
          opts: { jobId: jobIdForKey(key), removeOnComplete: true, removeOnFail: true },
        };
      }),
    );
    const processCall = build.createCallProcessor({ store, tools: [noopEffectTool()] });
    let settled = 0;
    let done: () => void = () => {};
    const all = new Promise<void>((resolve) => {
      done = resolve;
    });
    // An in-flight job ends delayed, not completed: count what the processor settled, then what BullMQ did.
    const processor = async (job: Job, token?: string) => {
      try {
        return outcome === "raw" ? RESULT_100 : await processCall(job, token);
      } finally {
        settled++;
      }
    };
    const connection = ctx.target.connect({ forWorker: true });
    const worker = new Worker(queueName, processor, {
      connection,
      prefix: bullPrefix,
      concurrency: 50,
      autorun: false,
    });
    let finished = 0;
    const count = () => {
      if (++finished === jobs) done();
    };
    worker.on("completed", count);
    worker.on("failed", count);
    await worker.waitUntilReady();
    try {
      return await measure(async () => {
        void worker.run();
        if (outcome === "in_flight") {
          // moveToDelayed has run when the processor settles; then give BullMQ a moment to fetch on.
          while (settled < jobs) await new Promise((r) => setTimeout(r, 5));
          await new Promise((r) => setTimeout(r, 100));
        } else {
          await all;
        }
      }, undefined);
    } finally {
      await worker.close();
      await connection.quit();
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close();
    }
  };

  try {
    const raw = await runWorker("raw");
    const outcomes = {} as Record<Outcome, OutcomeCommands>;
    for (const outcome of OUTCOMES) {
      const keys = keysFor(`${ctx.prefix}rt-store-${outcome}`);
      await seed(outcome, keys);
      const storeCount = await measure(async () => {
        for (let i = 0; i < keys.length; i += 50) {
          await Promise.all(
            keys.slice(i, i + 50).map((key) => storeCalls(store as RedisStore, outcome, key)),
          );
        }
      }, storeClient);
      outcomes[outcome] = { store: storeCount, worker: await runWorker(outcome) };
    }
    return { jobs, raw, outcomes };
  } finally {
    await storeClient.quit();
    await queueClient.quit();
  }
}
