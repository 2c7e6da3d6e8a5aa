import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { RequestOptions } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { type CallToolResult, CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { ONCE_STEP_META, type OnceStep } from "./step.js";

/**
 * Calls a tool of an MCP server that serves once tools (`onceMcpServer`) as the step `step`: the request's
 * `_meta["once/step"]` names it. Call again with the same step after a timeout, a dropped connection or a
 * restart — the effect runs once, and every later call is answered from the server's store.
 */
export async function callOnceTool(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  step: OnceStep,
  options?: RequestOptions,
): Promise<CallToolResult> {
  return (await client.callTool(
    { name, arguments: args, _meta: { [ONCE_STEP_META]: { ...step } } },
    CallToolResultSchema,
    options,
  )) as CallToolResult;
}
