import { MemoryOrderBook, orderAgentModel } from "@once/order-agent";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { generateText, stepCountIs } from "ai";
import { expect, it } from "vitest";
import { onceTask } from "../src/index.js";
import { agentTools, pendingOrder } from "./agent-tools.js";
import { payments, store, useAgentWorld } from "./agent-world.js";

const spans = new InMemorySpanExporter();
trace.setGlobalTracerProvider(
  new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] }),
);
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

useAgentWorld("ai-tracing", 0);

it("a turn's model call is a span with the GenAI names; a replayed turn is a dedup hit linked to the span that recorded it", async () => {
  const orderId = `order-trace-${process.pid}`;
  const orders = new MemoryOrderBook();
  await orders.create(pendingOrder(orderId));
  const run = async () => {
    const agent = orderAgentModel(orderId);
    const task = onceTask({ taskId: `task-${orderId}`, store, tools: agentTools(payments.url, orders).all });
    await generateText({
      model: task.model(agent.model),
      tools: task.tools,
      stopWhen: stepCountIs(10),
      prompt: "go",
    });
  };
  await run();
  const recorded = spans.getFinishedSpans().filter((s) => s.name === "effect model_turn");
  expect(recorded).toHaveLength(4);
  expect(recorded[0]?.attributes).toMatchObject({
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "mock",
    "gen_ai.request.model": "order-agent",
  });
  // Prompts and completions stay out of telemetry.
  expect(JSON.stringify(recorded.map((s) => s.attributes))).not.toContain("Settle");
  spans.reset();

  await run();
  const replayed = spans.getFinishedSpans().filter((s) => s.name === "run model_turn");
  expect(replayed).toHaveLength(4);
  expect(spans.getFinishedSpans().filter((s) => s.name === "effect model_turn")).toHaveLength(0);
  for (const span of replayed) {
    expect(span.attributes["once.outcome"]).toBe("replay");
    expect(span.events.map((e) => e.name)).toContain("once.dedup_hit");
    expect(span.links.map((l) => l.context.spanId)).toHaveLength(1);
  }
  const recordedIds = new Set(recorded.map((s) => s.parentSpanContext?.spanId));
  for (const span of replayed) expect(recordedIds.has(span.links[0]?.context.spanId)).toBe(true);
});
