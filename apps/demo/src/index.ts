import { fileURLToPath } from "node:url";

export type { AgentFigures } from "./agent/agent-figures.js";
export {
  type ApprovalFigures,
  type ApproverLine,
  countApprovals,
} from "./agent/approvals/approval-figures.js";
export { APPROVAL_THRESHOLD_CENTS } from "./agent/approvals/charge-approval.js";
export { type FoundRedis, findRedis, NoRedisError } from "./find-redis.js";
export { formatComparison } from "./format-comparison.js";
export type { ModeFigures } from "./mode-figures.js";
export { type ModeEvent, type ModeOptions, type ModeRun, runMode } from "./run-mode.js";

/** The demo's entry point, for `spawn(process.execPath, [DEMO_MAIN, …])`. */
export const DEMO_MAIN = fileURLToPath(new URL("./main.js", import.meta.url));
