import { randomBytes } from "node:crypto";
import type { AnyTool, EffectContext } from "@once/core";

/**
 * A tool's call as a framework runs it without once: the tool's own `run`, at once, straight to the provider.
 * Every run gets a fresh key (what a retry mints when nothing journaled the step), so the provider, which
 * honours no key anyway, sees each one as a new request.
 */
export function runPlain(
  tool: AnyTool,
  taskId: string,
  toolCallId: string,
  input: unknown,
): Promise<unknown> {
  const context: EffectContext = {
    tool: tool.name,
    namespace: "default",
    taskId,
    stepId: toolCallId,
    attempt: 1,
    signal: new AbortController().signal,
    key: randomBytes(32).toString("hex"),
    fence: 0,
    // No lease: nothing claimed the call.
    assertLease: async () => {},
  };
  return Promise.resolve(tool.run(input as never, context, undefined));
}
