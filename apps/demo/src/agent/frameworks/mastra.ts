import { Agent } from "@mastra/core/agent";
import { MastraLanguageModelV2Mock } from "@mastra/core/test-utils/llm-mock";
import { createTool, type Tool } from "@mastra/core/tools";
import { onceRun } from "@once/mastra";
import { runPlain } from "../plain-tools.js";
import { resendOnTimeout } from "../resend-on-timeout.js";
import type { AgentFramework } from "./framework.js";
import { modelLatency, scriptedAnswer, turnOf } from "./order-agent-script.js";

type CallOptions = Parameters<MastraLanguageModelV2Mock["doGenerate"]>[0];

const turnOfCall = (call: CallOptions) =>
  turnOf(
    call.prompt.flatMap((m) => (m.role === "tool" ? m.content.filter((p) => p.type === "tool-result") : []))
      .length,
  );

/** The order agent on Mastra's own mock language model. */
function scriptedModel(orderId: string, answered: (turn: number) => Promise<void>) {
  return new MastraLanguageModelV2Mock({
    provider: "mock",
    modelId: "order-agent",
    doGenerate: async (call) => {
      await modelLatency();
      const turn = turnOfCall(call);
      await answered(turn);
      const { calls, text } = scriptedAnswer(orderId, turn);
      const content =
        calls.length > 0
          ? calls.map((c) => ({
              type: "tool-call" as const,
              toolCallId: c.id,
              toolName: c.name,
              input: JSON.stringify(c.input),
            }))
          : [{ type: "text" as const, text }];
      return {
        content,
        finishReason: calls.length > 0 ? ("tool-calls" as const) : ("stop" as const),
        usage: { inputTokens: 100, outputTokens: 20, totalTokens: 120 },
        warnings: [],
      };
    },
  });
}

/** Mastra's own `Agent` (`agent.generate`) on its mock model; once through `@once/mastra`. */
export const mastra: AgentFramework = {
  loop: "a Mastra Agent (agent.generate)",
  async runTask(run) {
    const once =
      run.store &&
      onceRun({
        runId: run.taskId,
        store: run.store,
        tools: run.tools,
        leaseMs: run.leaseMs,
        turnLeaseMs: run.leaseMs,
      });
    const inner = scriptedModel(run.orderId, run.answered);
    const model = once ? once.model(inner) : inner;
    // Outermost: the agent has taken this turn's answer (for once, after the turn was recorded).
    const taking = Object.assign(Object.create(null), {
      specificationVersion: inner.specificationVersion,
      provider: inner.provider,
      modelId: inner.modelId,
      supportedUrls: {},
      doGenerate: async (call: CallOptions) => {
        const result = await model.doGenerate(call);
        await run.taken(turnOfCall(call));
        return result;
      },
      doStream: (call: CallOptions) => model.doStream(call),
    }) as MastraLanguageModelV2Mock;
    const tools: Record<string, Tool> =
      once?.tools ??
      Object.fromEntries(
        run.tools.map((declared) => [
          declared.name,
          createTool({
            id: declared.name,
            description: declared.description ?? declared.name,
            inputSchema: declared.input as never,
            execute: (input: unknown, context) =>
              runPlain(declared, run.taskId, context?.agent?.toolCallId ?? "(none)", input),
          }) as unknown as Tool,
        ]),
      );
    for (const t of Object.values(tools))
      if (t.execute) t.execute = resendOnTimeout(t.id, t.execute.bind(t), run.resend) as typeof t.execute;
    const agent = new Agent({
      id: "order-agent",
      name: "order agent",
      instructions: "You settle orders: read the order, charge it, email the receipt, mark it paid.",
      model: taking,
      tools,
    });
    const result = await agent.generate(run.prompt, { runId: run.taskId, maxSteps: 10 });
    const { error } = result as { error?: unknown };
    if (error) throw error;
  },
};
