export { RecordedTurnMismatchError, UnrecordedToolCallError, UnsettledToolCallError } from "@once/agent";
export { type OnceRun, type OnceRunOptions, onceRun } from "./once-run.js";
export { type OnceStepOptions, onceStep } from "./once-step.js";
export type { RecordedTurn, SpecLanguageModel } from "./recorded-turn.js";
