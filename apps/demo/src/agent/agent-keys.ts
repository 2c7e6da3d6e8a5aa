import type { KeyLayout } from "@once/order-agent";

/** The fields the agent orchestrator counts in the layout's `stats` hash (RedisCounters). */
export const AGENT_COUNTERS = {
  toolCalls: "tool_calls",
  resends: "tool_resends",
  conflicts: "once_errors",
} as const;

/** The hash of the model's answers per task and turn (see ModelCallLog). */
export function modelCallLogKey(layout: KeyLayout): string {
  return `${layout.root}model-calls`;
}
