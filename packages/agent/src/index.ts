export {
  AgentTask,
  type AgentTaskOptions,
  journal,
  type TurnRequest,
  type TurnStep,
  type TurnToolCall,
} from "./agent-task.js";
export { RecordedTurnMismatchError, UnrecordedToolCallError, UnsettledToolCallError } from "./errors.js";
