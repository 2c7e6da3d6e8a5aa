import { randomBytes } from "node:crypto";
import type { AnyTool, EffectContext } from "@once/core";
import { type Tool, tool } from "ai";

/**
 * The tools as an AI SDK loop has them without once: each call runs the tool's own `run` at once, straight
 * to the provider. Every run gets a fresh key (what a retry mints when nothing journaled the step), so the
 * provider, which honours no key anyway, sees each one as a new request.
 */
export function plainTools(declared: readonly AnyTool[], taskId: string): Record<string, Tool> {
  return Object.fromEntries(
    declared.map((once) => [
      once.name,
      tool({
        ...(once.description === undefined ? {} : { description: once.description }),
        inputSchema: once.input,
        execute: (input: unknown, { toolCallId }: { toolCallId: string }) => {
          const context: EffectContext = {
            tool: once.name,
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
          return once.run(input, context, undefined);
        },
      } as Tool),
    ]),
  );
}
