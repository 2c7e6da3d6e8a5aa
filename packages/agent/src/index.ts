export {
  AgentTask,
  type AgentTaskOptions,
  type TurnRequest,
  type TurnStep,
  type TurnToolCall,
} from "./agent-task.js";
export { RecordedTurnMismatchError, UnrecordedToolCallError } from "./errors.js";
