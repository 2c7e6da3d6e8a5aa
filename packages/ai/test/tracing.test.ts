import { OpenTelemetry } from "@ai-sdk/otel";
import { hookedOrderAgentTools, MemoryOrderBook, orderAgentModel, pendingOrder } from "@once/order-agent";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { generateText, registerTelemetry, stepCountIs } from "ai";
import { expect, it } from "vitest";
import { onceTask } from "../src/index.js";
import { payments, store, useAgentWorld } from "./agent-world.js";

const spans = new InMemorySpanExporter();
trace.setGlobalTracerProvider(
  new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] }),
);
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
// The AI SDK's own spans, through its OpenTelemetry integration, beside once's.
registerTelemetry(new OpenTelemetry());

useAgentWorld("ai-tracing", 0);

const PROMPT = "Settle the order and keep it discreet.";
let serial = 0;

/** One run of the task's loop under a span of the caller's (the task's), as an orchestrator would trace it. */
async function runTraced(orderId: string, telemetry?: { recordInputs: boolean; recordOutputs: boolean }) {
  const agent = orderAgentModel(orderId);
  const orders = new MemoryOrderBook();
  await orders.create(pendingOrder(orderId));
  const task = onceTask({
    taskId: `task-${orderId}`,
    store,
    tools: hookedOrderAgentTools(payments.url, orders).all,
  });
  await trace.getTracer("orchestrator").startActiveSpan("task", async (taskSpan) => {
    await generateText({
      model: task.model(agent.model),
      tools: task.tools,
      stopWhen: stepCountIs(10),
      prompt: PROMPT,
      ...(telemetry ? { telemetry } : {}),
    });
    taskSpan.end();
  });
  return lastTaskTrace();
}

/** The task span of the last run, and every span of its trace. */
function lastTaskTrace() {
  const all = spans.getFinishedSpans();
  const task = all.filter((s) => s.name === "task").at(-1);
  if (!task) throw new Error("no task span");
  return { task, trace: all.filter((s) => s.spanContext().traceId === task.spanContext().traceId) };
}

it("the AI SDK's spans and once's nest in one trace per task: each recorded turn under the SDK's model call, each tool call under its execute_tool", async () => {
  spans.reset();
  const { trace: all } = await runTraced(`order-nest-${process.pid}-${++serial}`);
  const byId = new Map(all.map((s) => [s.spanContext().spanId, s]));
  const ancestors = (span: (typeof all)[number]) => {
    const names: string[] = [];
    for (
      let p = byId.get(span.parentSpanContext?.spanId ?? "");
      p;
      p = byId.get(p.parentSpanContext?.spanId ?? "")
    )
      names.push(p.name);
    return names;
  };
  const turns = all.filter((s) => s.name === "effect model_turn");
  expect(turns).toHaveLength(4);
  for (const turn of turns)
    expect(ancestors(turn)).toEqual(expect.arrayContaining(["chat order-agent", "task"]));
  const charge = all.filter((s) => s.name === "effect charge_customer");
  expect(charge).toHaveLength(1);
  expect(ancestors(charge[0] as (typeof all)[number])).toEqual(
    expect.arrayContaining(["execute_tool charge_customer", "task"]),
  );
  // Nothing of the task's escaped to another trace.
  expect(spans.getFinishedSpans().every((s) => byId.has(s.spanContext().spanId))).toBe(true);
});

it("with the SDK's recordInputs and recordOutputs off, no span of the task holds the prompt, a completion or a tool input", async () => {
  spans.reset();
  const orderId = `order-quiet-${process.pid}-${++serial}`;
  const { trace: all } = await runTraced(orderId, { recordInputs: false, recordOutputs: false });
  const text = JSON.stringify(all.map((s) => [s.attributes, s.events.map((e) => e.attributes)]));
  expect(text).not.toContain("discreet"); // the prompt
  expect(text).not.toContain("is paid"); // the model's final answer
  expect(text).not.toContain('"amount'); // the charge's input
  // Once's own spans never hold them, whatever the SDK records.
  spans.reset();
  const { trace: loud } = await runTraced(`order-loud-${process.pid}-${++serial}`);
  const onceSpans = loud.filter((s) => /^(call|run|effect) /.test(s.name));
  expect(onceSpans.length).toBeGreaterThan(0);
  const onceText = JSON.stringify(onceSpans.map((s) => [s.attributes, s.events.map((e) => e.attributes)]));
  expect(onceText).not.toContain("discreet");
  expect(onceText).not.toContain('"amount');
  expect(JSON.stringify(loud.map((s) => s.attributes))).toContain("discreet"); // the SDK's do, by default
});

it("a turn's model call is a span with the GenAI names; a replayed turn is a dedup hit linked to the span that recorded it", async () => {
  spans.reset();
  const orderId = `order-trace-${process.pid}`;
  const orders = new MemoryOrderBook();
  await orders.create(pendingOrder(orderId));
  const run = async () => {
    const agent = orderAgentModel(orderId);
    const task = onceTask({
      taskId: `task-${orderId}`,
      store,
      tools: hookedOrderAgentTools(payments.url, orders).all,
    });
    await generateText({
      model: task.model(agent.model),
      tools: task.tools,
      stopWhen: stepCountIs(10),
      prompt: PROMPT,
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
  // Prompts and completions stay out of once's telemetry.
  expect(JSON.stringify(recorded.map((s) => s.attributes))).not.toContain("discreet");
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
