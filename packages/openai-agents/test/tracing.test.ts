import { run } from "@openai/agents";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { expect, it } from "vitest";
import { onceTask } from "../src/index.js";
import { payments, store, useAgentWorld } from "./agent-world.js";
import { orderAgent, orderTools, PROMPT } from "./order-agent.js";
import { OrderAgentModel } from "./order-agent-model.js";

const spans = new InMemorySpanExporter();
trace.setGlobalTracerProvider(
  new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] }),
);
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

useAgentWorld("openai-agents-tracing");

it("a turn's model call is a span with the GenAI names, the model's class and name; a replayed turn is a dedup hit", async () => {
  const orderId = `order-trace-${process.pid}`;
  const runAgent = async () => {
    const model = new OrderAgentModel(orderId);
    const task = onceTask({
      taskId: `task-${orderId}`,
      store,
      tools: (await orderTools(payments.url, orderId)).all,
    });
    await run(orderAgent(task.model(model, "order-agent"), task.tools), PROMPT);
  };
  await runAgent();
  const recorded = spans.getFinishedSpans().filter((s) => s.name === "effect model_turn");
  expect(recorded).toHaveLength(4);
  expect(recorded[0]?.attributes).toMatchObject({
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "OrderAgentModel",
    "gen_ai.request.model": "order-agent",
  });
  // Instructions, prompts and completions stay out of telemetry.
  expect(JSON.stringify(recorded.map((s) => s.attributes))).not.toMatch(/settle|is paid/i);
  spans.reset();

  await runAgent();
  const replayed = spans.getFinishedSpans().filter((s) => s.name === "run model_turn");
  expect(replayed).toHaveLength(4);
  expect(spans.getFinishedSpans().filter((s) => s.name === "effect model_turn")).toHaveLength(0);
  for (const span of replayed) {
    expect(span.attributes["once.outcome"]).toBe("replay");
    expect(span.events.map((e) => e.name)).toContain("once.dedup_hit");
  }
});
