export { RecordedTurnMismatchError, UnrecordedToolCallError, UnsettledToolCallError } from "@once/agent";
export { type ApprovalInterrupt, type OnceGraph, type OnceGraphOptions, onceGraph } from "./once-graph.js";
export type { RecordedTurn, TurnMark } from "./recorded-turn.js";
