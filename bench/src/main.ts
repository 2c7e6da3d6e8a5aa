import { randomBytes } from "node:crypto";
import { cpSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createCallProcessor } from "@once/bullmq";
import { RedisStore } from "@once/redis";
import { cleanupPrefix } from "@once/support";
import { BullMQOtel } from "bullmq-otel";
import { compareAgentTurns } from "./agent-turns.js";
import type { BenchContext, OnceBuild } from "./bench-context.js";
import { type BenchOptions, parseBenchOptions } from "./bench-options.js";
import { compareDurability } from "./durability.js";
import { compareClaimLatency } from "./latency.js";
import { measureMemory } from "./memory.js";
import { measureParts } from "./parts.js";
import { comparePeers } from "./peers/peers.js";
import { comparePostgres } from "./postgres.js";
import { measureRecovery } from "./recovery.js";
import { type RedisTarget, startDedicatedRedis, useExistingRedis } from "./redis-target.js";
import { type Results, toJson, toTable } from "./report.js";
import { compareResume } from "./resume.js";
import { countRoundTrips } from "./round-trips.js";
import { infoField } from "./server-stats.js";
import { compareStores, type StoreComparison } from "./store-bench.js";
import { compareWorkers, type WorkerComparison, type WorkerSide } from "./throughput.js";
import { withTracingSdk } from "./tracing.js";
import { RESULT_100, resultOfSize } from "./workload.js";

async function main(): Promise<void> {
  const options = parseBenchOptions(process.argv.slice(2));
  const log = (message: string) => process.stderr.write(`[bench] ${message}\n`);
  const target = options.redisUrl
    ? await useExistingRedis(options.redisUrl)
    : await startDedicatedRedis(options.redisServerBin);
  const stopOnSignal = () => {
    void target.stop().finally(() => process.exit(130));
  };
  process.once("SIGINT", stopOnSignal);
  process.once("SIGTERM", stopOnSignal);
  const probe = target.connect();
  const prefix = `bench:${Date.now().toString(36)}${randomBytes(3).toString("hex")}:`;
  const started = performance.now();
  try {
    const builds = await loadBuilds(options);
    const ctx: BenchContext = { options, target, prefix, probe, builds, log };
    log(
      `Redis ${target.dedicated ? "spawned for this run" : "shared (commandstats include other clients)"} at ` +
        `${target.host}:${target.port}; measuring ${builds.map((b) => b.label).join(" and ")}`,
    );
    const results: Results = {
      machine: await machine(ctx),
      settings: {
        rounds: options.rounds,
        storeRounds: options.storeRounds,
        jobs: options.jobs,
        storeRoundMs: options.storeRoundMs,
        memoryRecords: options.memoryRecords,
      },
      builds: builds.map((b) => b.label),
    };
    const want = (section: BenchOptions["sections"][number]) => options.sections.includes(section);

    if (want("throughput")) {
      log(`throughput: ${options.rounds} rounds of ${options.jobs} jobs per side`);
      const sides: WorkerSide[] = [
        { name: "raw" },
        { name: "floor", floorScripts: 2 },
        { name: "floor replay", floorScripts: 1 },
      ];
      for (const build of builds) {
        const name = build.label;
        sides.push({ name, build }, { name: `${name} replay`, build, replay: true });
      }
      const chosen = options.sides ? sides.filter((s) => options.sides?.includes(s.name)) : sides;
      results.throughput = await compareWorkers(ctx, {
        sides: chosen,
        concurrency: 50,
        jobs: options.jobs,
        rounds: options.rounds,
      });
    }
    if (want("realistic")) {
      log(
        `realistic: ${options.rounds} rounds of ${options.jobs} jobs per side, a ${options.effectMs} ms effect, concurrency 200`,
      );
      results.realistic = await compareWorkers(ctx, {
        sides: [{ name: "raw" }, { name: "floor", floorScripts: 2 }, { name: "once", build: builds[0] }],
        concurrency: 200,
        jobs: options.jobs,
        rounds: options.rounds,
        effectMs: options.effectMs,
      });
    }
    if (want("tracing")) {
      log(
        `tracing: ${options.rounds} rounds of ${options.jobs} jobs per side, an OpenTelemetry SDK registered`,
      );
      results.tracing = await withTracingSdk(() =>
        compareWorkers(ctx, {
          sides: [
            { name: "raw" },
            { name: "once", build: builds[0] },
            { name: "once replay", build: builds[0], replay: true },
          ],
          concurrency: 50,
          jobs: options.jobs,
          rounds: options.rounds,
          telemetry: new BullMQOtel({ tracerName: "bench" }),
        }),
      );
    }
    if (want("parts")) {
      log(`parts: ${options.rounds} profiled rounds of ${options.jobs} jobs per side, and each script alone`);
      results.parts = await measureParts(ctx, { jobs: options.jobs, rounds: options.rounds });
    }
    if (want("store")) {
      results.store = [];
      for (const concurrency of [1, 50]) {
        log(`store: concurrency ${concurrency}`);
        results.store.push(
          await compareStores(ctx, {
            concurrency,
            result: RESULT_100,
            rounds: options.storeRounds,
            roundMs: options.storeRoundMs,
            localCache: true,
            autoPipelining: true,
          }),
        );
      }
    }
    if (want("roundTrips")) {
      log("round trips");
      results.roundTrips = await countRoundTrips(ctx);
    }
    if (want("memory")) {
      log(`memory: ${options.memoryRecords} records`);
      results.memory = await measureMemory(ctx, options.memoryRecords);
    }
    if (want("latency")) {
      results.latency = [];
      for (const concurrency of [1, 50]) {
        log(`latency: concurrency ${concurrency}`);
        results.latency.push(
          await compareClaimLatency(ctx, {
            concurrency,
            rounds: options.rounds,
            roundMs: options.storeRoundMs * 2,
          }),
        );
      }
    }
    if (want("scaling")) {
      const rounds = Math.min(3, options.rounds);
      const roundMs = options.storeRoundMs;
      const resultSize: StoreComparison[] = [];
      for (const bytes of [100, 1_024, 65_536]) {
        log(`scaling: ${bytes}-byte result`);
        resultSize.push(
          await compareStores(ctx, { concurrency: 50, result: resultOfSize(bytes), rounds, roundMs }),
        );
      }
      const concurrency: StoreComparison[] = [];
      const workers: WorkerComparison[] = [];
      const jobs = Math.min(options.jobs, 2_000);
      for (const c of [1, 10, 50, 200]) {
        log(`scaling: concurrency ${c}`);
        concurrency.push(await compareStores(ctx, { concurrency: c, result: RESULT_100, rounds, roundMs }));
        workers.push(
          await compareWorkers(ctx, {
            sides: [{ name: "raw" }, { name: "once", build: builds[0] }],
            concurrency: c,
            jobs: c === 1 ? Math.min(jobs, 1_000) : jobs,
            rounds,
          }),
        );
      }
      results.scaling = { resultSize, concurrency, workers };
    }

    if (want("agent")) {
      results.agent = [];
      for (const responseBytes of [2_048, 32_768]) {
        log(`agent: model turns with a ${responseBytes}-byte response`);
        results.agent.push(
          await compareAgentTurns(ctx, {
            responseBytes,
            rounds: options.storeRounds,
            roundMs: options.storeRoundMs,
          }),
        );
      }
    }

    if (want("resume")) {
      log("resume: agent tasks of 10, 100 and 1,000 recorded turns, resumed");
      results.resume = await compareResume(ctx, { turns: [10, 100, 1_000], rounds: 5 });
    }

    if (want("recovery")) {
      results.recovery = await measureRecovery(ctx, { kills: options.kills, effectMs: options.effectMs });
    }

    if (want("durability")) {
      results.durability = await compareDurability(ctx, {
        concurrency: [1, 50],
        rounds: options.storeRounds,
        roundMs: options.storeRoundMs,
      });
    }

    if (want("postgres")) {
      results.postgres = await comparePostgres(ctx, {
        rounds: options.rounds,
        storeRounds: options.storeRounds,
        roundMs: options.storeRoundMs,
        jobs: options.jobs,
      });
    }

    if (want("peers")) {
      results.peers = await comparePeers(ctx, {
        sides: options.peerSides,
        rounds: options.peerRounds,
        effectMs: options.effectMs,
        quick: options.quick,
        kills: options.kills,
        killSteps: 10,
        killLeaseMs: 2_000,
        budgetMs: options.quick ? 20_000 : 60_000,
        warmUpMs: options.quick ? 1_000 : 3_000,
        partsRounds: options.quick ? 1 : 3,
      });
    }

    results.machine.benchSeconds = Math.round((performance.now() - started) / 1000);
    console.log(toTable(results));
    if (options.jsonPath) {
      const json = options.onlyGiven ? mergeInto(options.jsonPath, toJson(results)) : toJson(results);
      writeFileSync(options.jsonPath, `${JSON.stringify(json, null, 2)}\n`);
      log(`wrote ${options.jsonPath}`);
    }
  } finally {
    await cleanUp(target, probe, prefix).catch((error) => log(`clean-up failed: ${error}`));
    probe.disconnect();
    await target.stop();
  }
}

/**
 * A run of some sections (--only) written into an existing JSON report: its sections and goals replace those
 * of the same name, and the rest of the file (another run's sections, machine and settings) stays. The run's
 * own machine goes with each section it wrote, as `<section>Machine`.
 */
function mergeInto(file: string, json: Record<string, unknown>): Record<string, unknown> {
  if (!existsSync(file)) return json;
  const old = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  const merged: Record<string, unknown> = { ...old };
  for (const [key, value] of Object.entries(json)) {
    if (key === "machine" || key === "settings" || key === "builds") continue;
    if (key === "goals") merged.goals = { ...(old.goals as object), ...(value as object) };
    else {
      merged[key] = value;
      merged[`${key}Machine`] = json.machine;
    }
  }
  return merged;
}

/** The current build, and with --baseline a pre-change build of @once/redis and @once/bullmq to compare. */
async function loadBuilds(options: BenchOptions): Promise<OnceBuild[]> {
  if (!options.baselineDir) return [{ label: "once", RedisStore, createCallProcessor }];
  // Beside a baseline the current build runs from a copy laid out as the baseline is, so both are loaded
  // alike: run in-tree, a build measured up to 10 % slower than a copy of itself (docs/performance.md).
  return [
    await importBuild("once", copyCurrentBuild()),
    await importBuild("before", path.resolve(options.baselineDir)),
  ];
}

/** A build laid out as docs/performance.md's before/after commands make one: redis/, bullmq/, node_modules/@once/core. */
async function importBuild(label: string, dir: string): Promise<OnceBuild> {
  const redis = (await import(pathToFileURL(path.join(dir, "redis/index.js")).href)) as {
    RedisStore: typeof RedisStore;
  };
  const bullmq = (await import(pathToFileURL(path.join(dir, "bullmq/index.js")).href)) as {
    createCallProcessor: typeof createCallProcessor;
  };
  return { label, RedisStore: redis.RedisStore, createCallProcessor: bullmq.createCallProcessor };
}

/** Copies the working tree's built core, engine, redis and bullmq to bench/baseline/.current (git-ignored). */
function copyCurrentBuild(): string {
  const packages = fileURLToPath(new URL("../../packages/", import.meta.url));
  const dir = fileURLToPath(new URL("../baseline/.current/", import.meta.url));
  rmSync(dir, { recursive: true, force: true });
  cpSync(path.join(packages, "redis/dist"), path.join(dir, "redis"), { recursive: true });
  cpSync(path.join(packages, "bullmq/dist"), path.join(dir, "bullmq"), { recursive: true });
  cpSync(path.join(packages, "bullmq/package.json"), path.join(dir, "package.json"));
  // The packages bullmq and redis import, beside them: the copy never reaches back into the workspace.
  for (const name of ["core", "engine"]) {
    const installed = path.join(dir, "node_modules/@once", name);
    cpSync(path.join(packages, name, "dist"), path.join(installed, "dist"), { recursive: true });
    cpSync(path.join(packages, name, "package.json"), path.join(installed, "package.json"));
  }
  return dir;
}

async function machine(ctx: BenchContext): Promise<Record<string, unknown>> {
  const cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  return {
    cores: os.availableParallelism(),
    cpu: /^model name\s*:\s*(.*)$/m.exec(cpuinfo)?.[1] ?? os.cpus()[0]?.model ?? "unknown",
    node: process.version,
    redis: await infoField(ctx.probe, "server", "redis_version"),
    redisDedicated: ctx.target.dedicated,
    loadAverageAtStart: os.loadavg().map((l) => Number(l.toFixed(2))),
  };
}

/** Deletes every key this run made on a shared Redis (a spawned server goes away whole). */
async function cleanUp(target: RedisTarget, probe: BenchContext["probe"], prefix: string): Promise<void> {
  if (target.dedicated) return;
  await cleanupPrefix(probe, prefix);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
