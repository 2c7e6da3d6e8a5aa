import type { AnyTool, OnceStore } from "@once/core";
import type { ResendOptions } from "../resend-on-timeout.js";

/** What one order task of the agent demo hands a framework's runner. */
export interface AgentTaskRun {
  mode: "naive" | "once";
  taskId: string;
  orderId: string;
  /** once's store (once mode only). */
  store?: OnceStore;
  /** The order agent's once tools, runnable. */
  tools: readonly AnyTool[];
  /** Lease of model turns and tool calls, so a killed orchestrator's calls are taken over soon. */
  leaseMs: number;
  prompt: string;
  /** The model answers a turn (counted as it answers, before the loop has it). */
  answered(turn: number): Promise<void>;
  /** The loop took the turn's answer (for once, after the turn was recorded). */
  taken(turn: number): Promise<void>;
  /** The orchestrator's re-send on timeout, for each tool call. */
  resend: ResendOptions;
}

/** One agent framework in the demo: its own loop, model mock and tools, naive or through its once adapter. */
export interface AgentFramework {
  /** Says what a task is, for the demo's header. */
  loop: string;
  /** Runs one task to its end; throws when the loop failed. */
  runTask(run: AgentTaskRun): Promise<void>;
}
