// One side of the peers comparison in a process of its own (see protocol.ts): its Node CPU is this process's,
// and a kill run can SIGKILL it in the middle of a step. Prints JSON lines; the parent reads them.
import { writeFileSync } from "node:fs";
import { profiled } from "../profiler.js";
import { percentile } from "../stats.js";
import { type ChildConfig, type ChildEvent, type CostResult, type KGrowth, PEER_SIDES } from "./protocol.js";
import type { RunnerFactory, SideRunner } from "./runners/runner.js";

const emit = (event: ChildEvent | Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify(event)}\n`);

/** Each side's runner, loaded only in the child that runs it (an engine's SDK is not loaded for another side). */
async function factoryFor(side: ChildConfig["side"]): Promise<RunnerFactory> {
  switch (side) {
    case "bare":
      return (await import("./runners/bare.js")).bareRunner;
    case "once-redis":
    case "once-postgres":
    case "once-transactional":
      return (await import("./runners/once.js")).inProcessRunner;
    case "once-bullmq":
      return (await import("./runners/once.js")).bullmqRunner;
    case "dbos":
      return (await import("./runners/dbos.js")).dbosRunner;
    case "restate":
      return (await import("./runners/restate.js")).restateRunner;
    case "workflow":
      return (await import("./runners/workflow.js")).workflowRunner;
  }
}

/** Per-step completion times (and, one task in flight, this process's CPU at each) of the timed window. */
class StepClock {
  readonly #taskStart = new Map<number, number>();
  readonly #last = new Map<number, number>();
  readonly added: number[] = [];
  /** By step index: the added ms and the Node CPU µs of that step, over the tasks (kept with one task in flight). */
  readonly byStep: { addedMs: number[]; cpuUs: number[] }[] = [];
  #lastCpu = 0;
  steps = 0;
  deadlineHit = false;

  constructor(
    private readonly effectMs: number,
    private readonly perStep: boolean,
  ) {}

  taskStarted(n: number): void {
    const now = performance.now();
    this.#taskStart.set(n, now);
    this.#last.set(n, now);
    if (this.perStep) this.#lastCpu = cpuUs();
  }

  step(n: number, i: number): void {
    if (this.deadlineHit) return;
    const now = performance.now();
    const last = this.#last.get(n);
    if (last === undefined) return;
    const added = now - last - this.effectMs;
    this.#last.set(n, now);
    this.added.push(added);
    this.steps++;
    if (this.perStep) {
      const cpu = cpuUs();
      let slot = this.byStep[i];
      if (!slot) {
        slot = { addedMs: [], cpuUs: [] };
        this.byStep[i] = slot;
      }
      slot.addedMs.push(added);
      slot.cpuUs.push(cpu - this.#lastCpu);
      this.#lastCpu = cpu;
    }
  }

  /** The first and last tenth of a long task's steps (at least 10 of each), when the clock kept them. */
  growth(): KGrowth | undefined {
    const done = this.byStep.length;
    if (!this.perStep || done < 100) return undefined;
    const window = Math.max(10, Math.floor(done / 10));
    const of = (from: number, pick: (s: { addedMs: number[]; cpuUs: number[] }) => number[]) =>
      percentile(this.byStep.slice(from, from + window).flatMap(pick), 50);
    return {
      window,
      lastStep: done - 1,
      firstAddedMs: of(0, (s) => s.addedMs),
      lastAddedMs: of(done - window, (s) => s.addedMs),
      firstNodeCpuUs: of(0, (s) => s.cpuUs),
      lastNodeCpuUs: of(done - window, (s) => s.cpuUs),
    };
  }
}

function cpuUs(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

/** Runs tasks `from`… (`count` of them, `k` steps each), `concurrency` in flight, until done or `stop()`. */
async function runTasks(
  runner: SideRunner,
  tasks: { from: number; count: number; k: number; concurrency: number },
  hooks: { started?(n: number): void; finished?(n: number): void; stop?(): boolean } = {},
): Promise<void> {
  let next = tasks.from;
  const end = tasks.from + tasks.count;
  const lane = async () => {
    while (next < end && !hooks.stop?.()) {
      const n = next++;
      hooks.started?.(n);
      await runner.runTask(n, tasks.k);
      hooks.finished?.(n);
    }
  };
  await Promise.all(Array.from({ length: Math.min(tasks.concurrency, tasks.count) }, lane));
}

/** Task numbers of the warm-up, out of the way of the timed tasks' ids. */
const WARM_UP_FROM = 1_000_000;

/**
 * The timed window of a cost run, after an untimed warm-up at the same concurrency (tasks of up to 10 steps
 * started for `warmUpMs`: a fresh process must JIT-compile the engine's and the bench's code, open its
 * connections and fill its caches before its figures mean anything). Ends when every task is done, or at the
 * budget: then the window is what finished by then.
 */
async function cost(config: ChildConfig, factory: RunnerFactory): Promise<CostResult> {
  let clock: StepClock | undefined;
  const runner = await factory(config, (task, step) => clock?.step(task, step), emit);
  const warmUntil = performance.now() + config.warmUpMs;
  await runTasks(
    runner,
    {
      from: WARM_UP_FROM,
      count: Number.MAX_SAFE_INTEGER - WARM_UP_FROM,
      k: Math.min(config.k, 10),
      concurrency: config.concurrency,
    },
    { stop: () => performance.now() >= warmUntil },
  );
  const timing = new StepClock(config.effectMs, config.concurrency === 1);
  clock = timing;
  // With a profile path, V8's CPU profiler samples the window (for the part table) and writes it there.
  const result = config.profilePath
    ? await profiled(
        undefined,
        "peers",
        () => window(config, runner, timing),
        (profile) => writeFileSync(config.profilePath as string, JSON.stringify(profile)),
      )
    : await window(config, runner, timing);
  // A truncated window leaves tasks running: the process exits without waiting for them.
  if (!result.truncated) await runner.close();
  return result;
}

/** The timed window itself: every task from 0, `concurrency` in flight, until done or out of budget. */
async function window(config: ChildConfig, runner: SideRunner, timing: StepClock): Promise<CostResult> {
  let tasksDone = 0;
  await runner.serverCpu?.start();
  const cpuBefore = cpuUs();
  const startedAt = performance.now();
  const measure = async (): Promise<CostResult> => {
    timing.deadlineHit = true;
    const seconds = (performance.now() - startedAt) / 1000;
    const nodeCpuUs = cpuUs() - cpuBefore;
    const serverCpuUs = runner.serverCpu ? (await runner.serverCpu.seconds()) * 1e6 : 0;
    const growth = timing.growth();
    return {
      steps: timing.steps,
      tasks: tasksDone,
      seconds,
      nodeCpuUs,
      serverCpuUs,
      addedP50Ms: percentile(timing.added, 50),
      addedP99Ms: percentile(timing.added, 99),
      truncated: tasksDone < config.tasks,
      ...(growth ? { growth } : {}),
    };
  };
  let timer: NodeJS.Timeout | undefined;
  const budget = new Promise<CostResult>((resolve) => {
    timer = setTimeout(() => resolve(measure()), config.budgetMs);
  });
  const finished = runTasks(
    runner,
    { from: 0, count: config.tasks, k: config.k, concurrency: config.concurrency },
    {
      started: (n) => timing.taskStarted(n),
      finished: () => void tasksDone++,
      stop: () => timing.deadlineHit,
    },
  ).then(() => {
    clearTimeout(timer);
    return measure();
  });
  return Promise.race([finished, budget]);
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? "") as ChildConfig;
  if (!PEER_SIDES.includes(config.side)) throw new Error(`unknown side ${JSON.stringify(config.side)}`);
  const factory = await factoryFor(config.side);
  if (config.mode === "cost") {
    emit({ type: "result", result: await cost(config, factory) });
    process.exit(0);
  }
  const runner = await factory(config, (task, step) => emit({ type: "step", task, step }), emit);
  emit({ type: "ready" });
  // serve: the parent drives the tasks; a signal ends this process.
  if (config.mode === "serve") return;
  await runTasks(
    runner,
    { from: config.fromTask, count: config.tasks - config.fromTask, k: config.k, concurrency: 1 },
    { finished: (task) => emit({ type: "task", task }) },
  );
  emit({ type: "done" });
  await runner.close();
  process.exit(0);
}

main().catch((error: unknown) => {
  emit({ type: "error", message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  process.exit(1);
});
