export {
  type PendingApproval,
  RecordedTurnMismatchError,
  UnrecordedToolCallError,
  UnsettledToolCallError,
} from "@once/agent";
export { type OnceTask, type OnceTaskOptions, onceTask } from "./once-task.js";
export type { RecordedTurn } from "./recorded-turn.js";
