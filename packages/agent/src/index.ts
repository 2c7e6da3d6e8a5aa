export {
  AgentTask,
  type AgentTaskOptions,
  describeApproval,
  journal,
  type PendingApproval,
  pendingApprovalOf,
  type TurnRequest,
  type TurnStep,
  type TurnToolCall,
} from "./agent-task.js";
export {
  type AgentErrorCode,
  RecordedTurnMismatchError,
  UnrecordedToolCallError,
  UnsettledToolCallError,
} from "./errors.js";
