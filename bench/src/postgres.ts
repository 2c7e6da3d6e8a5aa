import { randomBytes } from "node:crypto";
import { createCallProcessor, jobIdForKey } from "@once/bullmq";
import { deriveKey } from "@once/core";
import { PostgresStore } from "@once/postgres";
import { RedisStore } from "@once/redis";
import { type PostgresServerHandle, startPostgresServer } from "@once/support";
import { createPostgresBackend, type Job, Queue, Worker } from "bullmq";
import pg from "pg";
import type { BenchContext } from "./bench-context.js";
import { interleave, measureOps } from "./interleave.js";
import { median, ratio } from "./stats.js";
import { onceContender, type StepPayload, type StoreContender } from "./store-contenders.js";
import { benchCall, INPUT, noopEffectTool, RESULT_100, settleKeys, TOOL_NAME } from "./workload.js";

/** The store side by side: claim + complete cycles and replays per second, RedisStore and PostgresStore. */
export interface PostgresStoreFigures {
  concurrency: number;
  cyclesPerSec: Record<string, number>;
  replaysPerSec: Record<string, number>;
  cycleRounds: Record<string, number[]>;
  replayRounds: Record<string, number[]>;
}

/** BullMQ on its PostgreSQL backend: the plain processor and once's (run, and replayed), jobs per second. */
export interface PostgresWorkerFigures {
  concurrency: number;
  jobs: number;
  sides: Record<string, { jobsPerSec: number; ratioToRaw: number; rounds: number[] }>;
}

export interface PostgresFigures {
  /** `server_version`, and where it came from. */
  server: string;
  source: "POSTGRES_URL" | "local" | "throwaway";
  store: PostgresStoreFigures[];
  workers: PostgresWorkerFigures;
}

const REPLAY_POOL = 1_000;

/**
 * PostgresStore beside RedisStore (the same cycle and replay, interleaved round by round), and BullMQ on its
 * PostgreSQL backend raw vs once. PostgreSQL: POSTGRES_URL, else 127.0.0.1:5432 if it takes `postgres`
 * without a password, else a throwaway server started for the run. Everything it makes is in schemas of its
 * own, dropped at the end.
 */
export async function comparePostgres(
  ctx: BenchContext,
  settings: { rounds: number; storeRounds: number; roundMs: number; jobs: number },
): Promise<PostgresFigures> {
  const found = await findPostgres();
  const tag = `bench_${randomBytes(4).toString("hex")}`;
  const pool = new pg.Pool({ connectionString: found.url, max: 60 });
  pool.on("error", () => {});
  const schemas = [`${tag}_store`, `${tag}_workers`, `${tag}_bull`];
  try {
    const server = String((await pool.query("select current_setting('server_version') as v")).rows[0]?.v);
    ctx.log(`postgres: PostgreSQL ${server} (${found.source})`);
    const store: PostgresStoreFigures[] = [];
    for (const concurrency of [1, 50]) {
      ctx.log(`postgres: store, concurrency ${concurrency}`);
      store.push(await compareStoreSides(ctx, pool, `${tag}_store`, concurrency, settings));
    }
    ctx.log(
      `postgres: BullMQ on PostgreSQL, raw vs once, ${settings.rounds} rounds of ${settings.jobs} jobs`,
    );
    const workers = await compareWorkerSides(ctx, pool, found.url, tag, settings);
    return { server, source: found.source, store, workers };
  } finally {
    for (const schema of schemas)
      await pool.query(`drop schema if exists "${schema}" cascade`).catch(() => {});
    await pool.end();
    await found.stop();
  }
}

async function compareStoreSides(
  ctx: BenchContext,
  pool: pg.Pool,
  schema: string,
  concurrency: number,
  settings: { storeRounds: number; roundMs: number },
): Promise<PostgresStoreFigures> {
  const redis = ctx.target.connect();
  try {
    const sides: StoreContender[] = [
      onceContender(
        "RedisStore",
        await RedisStore.create({ redis, prefix: `${ctx.prefix}pgcmp${concurrency}:`, checks: false }),
        RESULT_100,
      ),
      onceContender("PostgresStore", await PostgresStore.create({ pool, schema, checks: false }), RESULT_100),
    ];
    const names = sides.map((s) => s.name);
    const byName = new Map(sides.map((s) => [s.name, s]));
    const payload = (side: string, round: number | string, n: number): StepPayload => ({
      taskId: `${schema}-c${concurrency}-${side}`,
      stepId: `${round}-${n}`,
      input: INPUT,
    });
    for (const side of sides)
      await measureOps(ctx.probe, concurrency, 200, (n) => side.cycle(payload(side.name, "warm", n)));
    const cycles = await interleave(names, settings.storeRounds, (name, round) =>
      measureOps(ctx.probe, concurrency, settings.roundMs, (n) =>
        (byName.get(name) as StoreContender).cycle(payload(name, round, n)),
      ),
    );
    const pools = new Map<string, StepPayload[]>();
    for (const side of sides) {
      const done = Array.from({ length: REPLAY_POOL }, (_, n) => payload(side.name, "done", n));
      for (let i = 0; i < done.length; i += 50)
        await Promise.all(done.slice(i, i + 50).map((p) => side.cycle(p)));
      pools.set(side.name, done);
    }
    const replays = await interleave(names, settings.storeRounds, (name) => {
      const done = pools.get(name) as StepPayload[];
      return measureOps(ctx.probe, concurrency, settings.roundMs, (n) =>
        (byName.get(name) as StoreContender).replay(done[n % done.length] as StepPayload),
      );
    });
    const ops = (list: { opsPerSec: number }[] = []) => list.map((f) => f.opsPerSec);
    return {
      concurrency,
      cyclesPerSec: Object.fromEntries(names.map((n) => [n, median(ops(cycles[n]))])),
      replaysPerSec: Object.fromEntries(names.map((n) => [n, median(ops(replays[n]))])),
      cycleRounds: Object.fromEntries(names.map((n) => [n, ops(cycles[n])])),
      replayRounds: Object.fromEntries(names.map((n) => [n, ops(replays[n])])),
    };
  } finally {
    await redis.quit();
  }
}

const SIDES = ["raw", "once", "once replay"] as const;
type Side = (typeof SIDES)[number];

async function compareWorkerSides(
  _ctx: BenchContext,
  pool: pg.Pool,
  url: string,
  tag: string,
  settings: { rounds: number; jobs: number },
): Promise<PostgresWorkerFigures> {
  const concurrency = 50;
  const jobs = Math.min(settings.jobs, 2_000);
  const store = await PostgresStore.create({ pool, schema: `${tag}_workers`, checks: false });
  const tool = noopEffectTool();
  const resultText = JSON.stringify(RESULT_100);
  const connection = { connectionString: url, schema: `${tag}_bull`, migrate: true, max: 20 };
  let serial = 0;

  const runSide = async (side: Side, count: number): Promise<number> => {
    const queueName = `pg-${side.replace(" ", "-")}-${serial++}`;
    const taskId = `${tag}-${queueName}`;
    const queue = new Queue(queueName, { connection }, createPostgresBackend);
    await queue.waitUntilReady();
    const calls = Array.from({ length: count }, (_, i) => ({
      data: benchCall(queueName, taskId, i),
      key: deriveKey({ namespace: "bench", taskId, stepId: String(i) }),
    }));
    if (side === "once replay")
      await settleKeys(
        store,
        calls.map(({ key }) => key),
        resultText,
        { batch: 100 },
      );
    for (let i = 0; i < calls.length; i += 500) {
      await queue.addBulk(
        calls.slice(i, i + 500).map(({ data, key }) => ({
          name: TOOL_NAME,
          data,
          opts: { removeOnComplete: true, removeOnFail: true, jobId: jobIdForKey(key) },
        })),
      );
    }
    const processor =
      side === "raw" ? async (_job: Job) => RESULT_100 : createCallProcessor({ store, tools: [tool] });
    const worker = new Worker(
      queueName,
      processor,
      { connection, concurrency, autorun: false },
      createPostgresBackend,
    );
    let completed = 0;
    const finished = new Promise<void>((resolve, reject) => {
      worker.on("completed", () => {
        if (++completed === count) resolve();
      });
      worker.on("failed", (_job, error) => reject(error));
    });
    await worker.waitUntilReady();
    try {
      const started = performance.now();
      void worker.run();
      await finished;
      return count / ((performance.now() - started) / 1000);
    } finally {
      await worker.close();
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close();
    }
  };

  for (const side of SIDES) await runSide(side, Math.min(jobs, 300));
  const results = await interleave(SIDES, settings.rounds, (side) => runSide(side, jobs));
  const raw = results.raw;
  return {
    concurrency,
    jobs,
    sides: Object.fromEntries(
      SIDES.map((side) => [
        side,
        {
          jobsPerSec: median(results[side]),
          ratioToRaw: median(results[side].map((r, i) => ratio(r, raw[i] ?? Number.NaN))),
          rounds: results[side],
        },
      ]),
    ),
  };
}

/** The PostgreSQL the bench uses: POSTGRES_URL, else 127.0.0.1:5432, else a throwaway server for the run. */
export async function findPostgres(): Promise<{
  url: string;
  source: PostgresFigures["source"];
  stop(): Promise<void>;
}> {
  if (process.env.POSTGRES_URL)
    return { url: process.env.POSTGRES_URL, source: "POSTGRES_URL", stop: async () => {} };
  const local = "postgres://postgres@127.0.0.1:5432/postgres";
  const client = new pg.Client({ connectionString: local, connectionTimeoutMillis: 2_000 });
  client.on("error", () => {});
  try {
    await client.connect();
    await client.query("select 1");
    return { url: local, source: "local", stop: async () => {} };
  } catch {
    const server: PostgresServerHandle = await startPostgresServer();
    return { url: server.url, source: "throwaway", stop: () => server.stop() };
  } finally {
    await client.end().catch(() => {});
  }
}
