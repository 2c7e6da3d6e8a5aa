/** Every side of the peers comparison, in the order the tables show them. */
export const PEER_SIDES = [
  "bare",
  "once-redis",
  "once-postgres",
  "once-bullmq",
  "once-transactional",
  "dbos",
  "restate",
  "workflow",
] as const;
export type PeerSide = (typeof PEER_SIDES)[number];

/**
 * What a side's child process is asked to do. `cost`: run `tasks` tasks of `k` steps, `concurrency` in
 * flight, and report one timed window. `run`: run tasks `fromTask`… one at a time and report each step as it
 * completes (the kill runs restart it with the interrupted task). `serve`: only host the steps (Restate's
 * endpoint, once's BullMQ worker) for a driver in the parent.
 */
export interface ChildConfig {
  side: PeerSide;
  mode: "cost" | "run" | "serve";
  providerUrl: string;
  /** The provider's fixed latency per effect, in ms (added latency is measured over it). */
  effectMs: number;
  /** Task ids are `${runId}-t${n}`, and step `i`'s order id at the provider `${taskId}-s${i}`. */
  runId: string;
  k: number;
  tasks: number;
  concurrency: number;
  fromTask: number;
  /** cost: the timed window ends here at the latest; what finished by then is reported, marked truncated. */
  budgetMs: number;
  /** cost: how long the untimed warm-up starts tasks for. */
  warmUpMs: number;
  /** cost: write a V8 CPU profile of the timed window here (for the part table). */
  profilePath?: string;
  /** once's sides: the lease of an effect call (the kill runs shorten it, so a takeover comes soon). */
  leaseMs?: number;
  redis?: { host: string; port: number; prefix: string };
  postgres?: { url: string; database: string };
  /**
   * Restate: the server's ingress and admin API, the port this child's endpoint listens on, the server's pid,
   * and whether this child registers the endpoint (the first one to serve does).
   */
  restate?: {
    ingressUrl: string;
    adminUrl: string;
    endpointPort: number;
    serverPid: number;
    register: boolean;
  };
  /** Workflow DevKit: the built handler bundles, the local world's data directory, the HTTP port. */
  workflow?: { buildDir: string; dataDir: string; port: number; resumeRunId?: string };
  /** once on BullMQ: the queue this side's dispatcher and worker share. */
  bullmq?: { queueName: string; prefix: string; lockDurationMs?: number; stalledIntervalMs?: number };
}

/** The timed window of one cost run, as the child measured it. */
export interface CostResult {
  steps: number;
  tasks: number;
  seconds: number;
  /** This child's CPU (user + system) over the window, µs. */
  nodeCpuUs: number;
  /** The side's server's CPU over the window, µs (0 for a side without one). */
  serverCpuUs: number;
  /** Each step's time from the previous step's completion (or its task's start), minus the provider's latency. */
  addedP50Ms: number;
  addedP99Ms: number;
  /** The budget ran out before every task finished. */
  truncated: boolean;
  /** With one task of many steps in flight: the first steps' cost against the last ones'. */
  growth?: KGrowth;
}

/** How a step's cost changes along one long task: medians of the first and last `window` steps. */
export interface KGrowth {
  window: number;
  /** The step index the last window ends at (k - 1 unless truncated). */
  lastStep: number;
  firstAddedMs: number;
  lastAddedMs: number;
  firstNodeCpuUs: number;
  lastNodeCpuUs: number;
}

/** The JSON lines a child prints (its `type` names the event). */
export type ChildEvent =
  | { type: "ready" }
  | { type: "result"; result: CostResult }
  | { type: "step"; task: number; step: number }
  | { type: "task"; task: number }
  | { type: "run-id"; task: number; runId: string }
  | { type: "effect"; orderId: string }
  | { type: "done" }
  | { type: "error"; message: string };

export const taskId = (runId: string, n: number): string => `${runId}-t${n}`;
export const orderId = (task: string, step: number): string => `${task}-s${step}`;
/** The task and step an order id names. */
export function parseOrderId(id: string): { task: number; step: number } | undefined {
  const match = /-t(\d+)-s(\d+)$/.exec(id);
  return match ? { task: Number(match[1]), step: Number(match[2]) } : undefined;
}
