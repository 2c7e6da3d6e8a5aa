import { fileURLToPath } from "node:url";

export { MemoryTaskJournal } from "./memory-task-journal.js";
export {
  type CallRecord,
  type OrchestratorMode,
  OrderOrchestrator,
  type OrderOrchestratorOptions,
  type StepEvent,
  type TaskReport,
} from "./order-orchestrator.js";
export { type PlannedCall, planNextStep } from "./plan-next-step.js";
export { RedisTaskJournal, type RedisTaskJournalOptions } from "./redis-task-journal.js";
export { orderFor, type RunOrderTasksOptions, type RunSummary, runOrderTasks } from "./run-order-tasks.js";
export { type OrchestratorFigures, percentile, summarizeRun } from "./summarize-run.js";
export { type JournalStep, stepIdOf, type TaskJournal } from "./task-journal.js";

/** The orchestrator process's entry point, for `spawn(process.execPath, [ORCHESTRATOR_MAIN, …])`. */
export const ORCHESTRATOR_MAIN = fileURLToPath(new URL("./main.js", import.meta.url));
