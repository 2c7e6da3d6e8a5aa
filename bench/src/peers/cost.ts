import { childFailure, startChild } from "./child-process.js";
import type { ChildConfig, CostResult, PeerSide } from "./protocol.js";
import type { PeerProvider } from "./provider.js";
import { type PeerServers, prepareSide } from "./sides.js";

/** One cost run's settings: which cell (K steps per task, tasks in flight), how many tasks, how long at most. */
export interface CostCell {
  k: number;
  concurrency: number;
  tasks: number;
  budgetMs: number;
  warmUpMs: number;
}

/** A side whose engine could not be set up here (a missing binary, a server that did not start). */
export class SideUnavailableError extends Error {
  constructor(side: PeerSide, cause: unknown) {
    super(`${side} could not start: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "SideUnavailableError";
  }
}

/** How many tasks a cell runs: enough steps for steady figures, at least one task per lane. */
export function tasksFor(k: number, concurrency: number, quick: boolean): number {
  const steps = concurrency === 1 ? (quick ? 30 : 300) : quick ? 200 : 2_000;
  return Math.max(concurrency, Math.ceil(steps / k));
}

/**
 * Runs one side on one cell in a child process of its own, on an environment made for the run and torn down
 * after it (a fresh database, restate-server, data directory). Throws with the reason the run failed.
 */
export async function runCostCell(
  servers: PeerServers,
  provider: PeerProvider,
  side: PeerSide,
  cell: CostCell,
  tag: string,
  effectMs: number,
  profilePath?: string,
): Promise<CostResult> {
  const env = await prepareSide(servers, side, tag).catch((error: unknown) => {
    throw new SideUnavailableError(side, error);
  });
  try {
    provider.reset();
    const config: ChildConfig = {
      side,
      mode: "cost",
      providerUrl: provider.url,
      effectMs,
      runId: tag,
      k: cell.k,
      tasks: cell.tasks,
      concurrency: cell.concurrency,
      fromTask: 0,
      budgetMs: cell.budgetMs,
      warmUpMs: cell.warmUpMs,
      ...(profilePath ? { profilePath } : {}),
      ...env.config,
    };
    const child = startChild(config, `peers ${side} k${cell.k} c${cell.concurrency}`);
    try {
      // Setup (an engine's launch, the warm-up's last tasks) gets three minutes beyond the warm-up and budget.
      const event = await child
        .waitFor((e) => e.type === "result" || e.type === "error", {
          timeoutMs: cell.warmUpMs + cell.budgetMs + 180_000,
        })
        .catch((error: unknown) => {
          throw childFailure(child, `${side} gave no result (${(error as Error).message.split(";")[0]})`);
        });
      if (event.type === "error") throw childFailure(child, `${side} failed`);
      return event.result as CostResult;
    } finally {
      await child.stop();
    }
  } finally {
    await env.cleanup();
  }
}
