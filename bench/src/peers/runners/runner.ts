import type { ChildConfig } from "../protocol.js";

/** What a side's child runs its tasks with. */
export interface SideRunner {
  /** Runs task `n`, of `k` steps, to its end. */
  runTask(n: number, k: number): Promise<void>;
  /** The CPU of the side's server (Redis, PostgreSQL's backends, restate-server); none for a side without one. */
  serverCpu?: CpuMeter;
  close(): Promise<void>;
}

/**
 * Builds a side's runner. `onStep(task, step)` is called as each step's result reaches the task's code (for the
 * Workflow DevKit, whose workflow code runs in a sandbox, as the step's body ends); an engine replaying a task
 * calls it again for the steps it replays.
 */
export type RunnerFactory = (
  config: ChildConfig,
  onStep: (task: number, step: number) => void,
  emit: (event: Record<string, unknown>) => void,
) => Promise<SideRunner>;

/** CPU seconds something outside this process uses over a window. */
export interface CpuMeter {
  /** The window starts now. */
  start(): Promise<void>;
  /** CPU seconds used since {@link start}. */
  seconds(): Promise<number>;
}

/** A meter over a counter that only grows (INFO cpu, a process's /proc stat). */
export function counterMeter(read: () => Promise<number> | number): CpuMeter {
  let at = 0;
  return {
    async start() {
      at = await read();
    },
    async seconds() {
      return (await read()) - at;
    },
  };
}

/** `value`, or a clear error when the parent left a side's settings out. */
export function required<T>(value: T | undefined, name: string): T {
  if (value === undefined) throw new Error(`this side needs its ${name} settings`);
  return value;
}
