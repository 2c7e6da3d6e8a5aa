import { onceTask } from "@once/ai";
import { modelLatencyMs, orderAgentModel, orderAgentTurn } from "@once/order-agent";
import { generateText, stepCountIs, type Tool, tool, wrapLanguageModel } from "ai";
import { runPlain } from "../plain-tools.js";
import { resendOnTimeout } from "../resend-on-timeout.js";
import type { AgentFramework } from "./framework.js";

/** The AI SDK's own `generateText` loop on the order agent's `MockLanguageModelV4`; once through `@once/ai`. */
export const aiSdk: AgentFramework = {
  loop: "an AI SDK generateText loop",
  async runTask(run) {
    const agent = orderAgentModel(run.orderId, { latencyMs: modelLatencyMs, answering: run.answered });
    const task =
      run.store &&
      onceTask({
        taskId: run.taskId,
        store: run.store,
        tools: run.tools,
        leaseMs: run.leaseMs,
        turnLeaseMs: run.leaseMs,
      });
    const tools: Record<string, Tool> =
      task?.tools ??
      Object.fromEntries(
        run.tools.map((once) => [
          once.name,
          tool({
            ...(once.description === undefined ? {} : { description: once.description }),
            inputSchema: once.input,
            execute: (input: unknown, { toolCallId }: { toolCallId: string }) =>
              runPlain(once, run.taskId, toolCallId, input),
          } as Tool),
        ]),
      );
    // Outermost: the loop has taken this turn's answer (for once, after the turn was recorded).
    const taking = wrapLanguageModel({
      model: task ? task.model(agent.model) : agent.model,
      middleware: {
        wrapGenerate: async ({ doGenerate, params }) => {
          const result = await doGenerate();
          await run.taken(orderAgentTurn(params.prompt));
          return result;
        },
      },
    });
    await generateText({
      model: taking,
      tools: Object.fromEntries(
        Object.entries(tools).map(([name, t]) => [
          name,
          t.execute ? { ...t, execute: resendOnTimeout(name, t.execute, run.resend) } : t,
        ]),
      ) as Record<string, Tool>,
      stopWhen: stepCountIs(10),
      prompt: run.prompt,
    });
  },
};
