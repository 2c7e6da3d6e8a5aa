import { aiSdk } from "./ai.js";
import type { AgentFramework } from "./framework.js";
import { langGraph } from "./langgraph.js";
import { mastra } from "./mastra.js";
import { openaiAgents } from "./openai-agents.js";

/** The agent frameworks the demo runs, by the name `--framework` takes. */
export const FRAMEWORKS = {
  ai: aiSdk,
  "openai-agents": openaiAgents,
  langgraph: langGraph,
  mastra,
} as const satisfies Record<string, AgentFramework>;

export type FrameworkName = keyof typeof FRAMEWORKS;

export function isFrameworkName(name: string): name is FrameworkName {
  return Object.hasOwn(FRAMEWORKS, name);
}
