import { onceTask } from "@once/openai-agents";
import {
  Agent,
  type FunctionTool,
  type Model,
  type ModelRequest,
  run as runAgent,
  setTracingDisabled,
  tool,
  Usage,
} from "@openai/agents";
import { assistantMessage, functionCall } from "@openai/agents/testing";
import { runPlain } from "../plain-tools.js";
import { resendOnTimeout } from "../resend-on-timeout.js";
import type { AgentFramework } from "./framework.js";
import { modelLatency, scriptedAnswer, turnOf } from "./order-agent-script.js";

// The demo calls no OpenAI service, for traces either.
setTracingDisabled(true);

const turnOfRequest = (request: ModelRequest) =>
  turnOf(
    typeof request.input === "string"
      ? 0
      : request.input.filter((i) => i.type === "function_call_result").length,
  );

/** The order agent as the SDK's `Model`, answering with the SDK's own test helpers. */
function scriptedModel(orderId: string, answered: (turn: number) => Promise<void>): Model {
  return {
    async getResponse(request) {
      await modelLatency();
      const turn = turnOfRequest(request);
      await answered(turn);
      const { calls, text } = scriptedAnswer(orderId, turn);
      const output =
        calls.length > 0
          ? calls.map((call) => functionCall(call.name, call.input, { callId: call.id }))
          : [assistantMessage(text)];
      return { output, usage: new Usage({ requests: 1, inputTokens: 100, outputTokens: 20 }) };
    },
    getStreamedResponse: () => {
      throw new Error("the demo's agent does not stream");
    },
  };
}

/** The OpenAI Agents SDK's own runner (`run`) on a scripted `Model`; once through `@once/openai-agents`. */
export const openaiAgents: AgentFramework = {
  loop: "an OpenAI Agents SDK run",
  async runTask(run) {
    const task =
      run.store &&
      onceTask({
        taskId: run.taskId,
        store: run.store,
        tools: run.tools,
        leaseMs: run.leaseMs,
        turnLeaseMs: run.leaseMs,
      });
    const inner = scriptedModel(run.orderId, run.answered);
    const model = task ? task.model(inner, "order-agent") : inner;
    // Outermost: the runner has taken this turn's answer (for once, after the turn was recorded).
    const taking: Model = {
      getResponse: async (request) => {
        const response = await model.getResponse(request);
        await run.taken(turnOfRequest(request));
        return response;
      },
      getStreamedResponse: (request) => model.getStreamedResponse(request),
    };
    const tools: FunctionTool[] =
      task?.tools ??
      run.tools.map(
        (once) =>
          tool({
            name: once.name,
            description: once.description ?? "",
            parameters: once.input as never,
            strict: true,
            execute: (input, _context, details) =>
              runPlain(once, run.taskId, details?.toolCall?.callId ?? "(none)", input),
          }) as FunctionTool,
      );
    const resending = tools.map((t) => ({
      ...t,
      invoke: resendOnTimeout(t.name, t.invoke.bind(t), run.resend),
    }));
    const agent = new Agent({
      name: "order agent",
      instructions: "You settle orders: read the order, charge it, email the receipt, mark it paid.",
      model: taking,
      tools: resending,
    });
    await runAgent(agent, run.prompt, { maxTurns: 10 });
  },
};
