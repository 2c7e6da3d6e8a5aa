import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { dynamicTool, type JSONSchema7, jsonSchema, type Tool } from "ai";
import { callOnceTool } from "./client.js";
import type { OnceStep } from "./step.js";

/** What names a tool call's step: `@once/ai`'s `onceTask(…)` (or `@once/agent`'s `AgentTask`). */
export interface StepSource {
  stepOf(toolName: string, toolCallId: string): OnceStep;
}

/**
 * The tools of an MCP server serving once tools, as AI SDK tools of an agent task: each call goes to the
 * server as the step of the recorded turn that made it (`task.stepOf(toolName, toolCallId)`), so a resumed
 * loop sends the same steps and the server answers them from its store. Give the loop the task's model
 * (`task.model(…)`), and these next to `task.tools`: `tools: { ...task.tools, ...mcpTools }`.
 */
export async function onceMcpTools(client: Client, task: StepSource): Promise<Record<string, Tool>> {
  const tools: Record<string, Tool> = {};
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor });
    for (const listed of page.tools) {
      const { name } = listed;
      // Dynamic: the schemas are the server's, known only at run time (as the AI SDK's own MCP tools are).
      tools[name] = dynamicTool({
        ...(listed.description === undefined ? {} : { description: listed.description }),
        inputSchema: jsonSchema(listed.inputSchema as JSONSchema7),
        execute: async (input, { toolCallId, abortSignal }) => {
          const step = task.stepOf(name, toolCallId);
          const { _meta: _how, ...result } = await callOnceTool(
            client,
            name,
            input as Record<string, unknown>,
            step,
            abortSignal ? { signal: abortSignal } : undefined,
          );
          // Without `_meta`, which says whether the store answered: the first answer and a replay must read
          // the same, since the next turn's prompt holds this result and a resumed turn is matched on it.
          return result;
        },
      });
    }
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return tools;
}
