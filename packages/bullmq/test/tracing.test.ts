import { createRequire } from "node:module";
import { type AnyTool, defineTool, deriveKey, IdempotencyConflictError } from "@once/core";
import { context, metrics, propagation, type SpanContext, SpanStatusCode, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from "@opentelemetry/core";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import {
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { Dispatcher, type DispatcherOptions, DispatchTimeoutError, jobIdForKey } from "../src/index.js";
import { CALL_VERSION } from "../src/internal.js";
import { type Harness, startHarness } from "./harness.js";

const spans = new InMemorySpanExporter();
const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const metricReader = new PeriodicExportingMetricReader({
  exporter: metricExporter,
  exportIntervalMillis: 3_600_000,
});
trace.setGlobalTracerProvider(
  new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] }),
);
metrics.setGlobalMeterProvider(new MeterProvider({ readers: [metricReader] }));
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
// What the SDK registers by default: the trace context and baggage travel in the job data through these.
propagation.setGlobalPropagator(
  new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
);

const SECRET = "sk_live_TOPSECRET_4242";

/** Gates the test tool's run so a test decides when it finishes. */
let gate: Promise<void> = Promise.resolve();
let effects = 0;
let onRun: (() => Promise<void>) | undefined;

const charge = defineTool({
  name: "charge_customer",
  kind: "effect",
  input: z.object({ orderId: z.string(), amount: z.number(), card: z.string().optional() }),
  output: z.object({ chargeId: z.string() }),
  leaseMs: 300,
  run: async (input, ctx) => {
    await onRun?.();
    await gate;
    if (input.orderId === "declined") throw new RangeError(`card ${input.card} declined`);
    effects += 1;
    return { chargeId: `ch_${input.orderId}_${ctx.fence}` };
  },
  reconcile: async (input) => ({ applied: true, result: { chargeId: `ch_${input.orderId}_found` } }),
  classifyError: (error) => (error instanceof RangeError ? "terminal" : "unknown"),
});
const tools: AnyTool[] = [charge];

let h: Harness;
let store: Harness["store"];
let queue: Harness["queue"];
let events: Harness["events"];
let queueName: string;

function dispatcher(options: Partial<DispatcherOptions> = {}): Promise<Dispatcher> {
  return h.dispatcher(options);
}

afterAll(async () => {
  await metricReader.shutdown();
});

beforeEach(async () => {
  h = await startHarness(tools);
  ({ store, queue, events, queueName } = h);
  gate = Promise.resolve();
  onRun = undefined;
  effects = 0;
  spans.reset();
});

afterEach(async () => {
  await h.close();
});

/** The finished spans as an indented tree of names, with the outcome of consumer spans. */
function tree(all: readonly ReadableSpan[]): string {
  const byParent = new Map<string | undefined, ReadableSpan[]>();
  const ids = new Set(all.map((s) => s.spanContext().spanId));
  for (const span of [...all].sort((a, b) => hr(a.startTime) - hr(b.startTime))) {
    const parent = span.parentSpanContext?.spanId;
    const key = parent && ids.has(parent) ? parent : undefined;
    byParent.set(key, [...(byParent.get(key) ?? []), span]);
  }
  const lines: string[] = [];
  const walk = (parent: string | undefined, depth: number) => {
    for (const span of byParent.get(parent) ?? []) {
      const outcome = span.attributes["once.outcome"];
      const status = span.status.code === SpanStatusCode.ERROR ? " !" : "";
      lines.push(
        `${"  ".repeat(depth)}${span.name.replace(queueName, "q")}${outcome ? ` [${outcome}]` : ""}${status}`,
      );
      walk(span.spanContext().spanId, depth + 1);
    }
  };
  walk(undefined, 0);
  return lines.join("\n");
}

function hr(time: [number, number]): number {
  return time[0] * 1e9 + time[1];
}

function named(name: string): ReadableSpan[] {
  return spans.getFinishedSpans().filter((s) => s.name.replace(queueName, "q") === name);
}

function eventNames(span: ReadableSpan): string[] {
  return span.events.map((e) => e.name);
}

async function settled(): Promise<void> {
  // Spans end in finally blocks just after the job settles; give them a tick.
  await new Promise((resolve) => setTimeout(resolve, 50));
}

async function addRaw(taskId: string, stepId: string, input: unknown) {
  const jobId = jobIdForKey(deriveKey({ taskId, stepId }));
  const data = {
    v: CALL_VERSION,
    tool: charge.name,
    kind: charge.kind,
    callId: `raw-${taskId}-${stepId}`,
    namespace: "default",
    taskId,
    stepId,
    input,
  };
  const job = await queue.add(charge.name, data, { jobId });
  return job.waitUntilFinished(events, 10_000);
}

describe("tracing", () => {
  it("the job carries what the app's propagators write, baggage included, and spans name this package's version", async () => {
    let seen: string | undefined;
    onRun = async () => {
      seen = propagation.getBaggage(context.active())?.getEntry("tenant")?.value;
    };
    const d = await dispatcher();
    const withBaggage = propagation.setBaggage(
      context.active(),
      propagation.createBaggage({ tenant: { value: "acme" } }),
    );
    await context.with(withBaggage, () =>
      d.call(charge, { orderId: "o-bag", amount: 1 }, { taskId: "t-bag", stepId: "s1" }),
    );
    await d.close();
    await settled();
    expect(seen).toBe("acme");
    const job = await queue.getJob(jobIdForKey(deriveKey({ taskId: "t-bag", stepId: "s1" })));
    expect(Object.keys(job?.data.trace ?? {}).sort()).toEqual(["baggage", "traceparent"]);
    // Every span of once comes from the engine, whichever transport carried the call.
    const version = (createRequire(import.meta.url)("../../engine/package.json") as { version: string })
      .version;
    const [process] = named("process q");
    expect(process?.instrumentationScope).toMatchObject({ name: "@once/engine", version });
  });

  it("a first run: call → send → process → effect, one trace, every attribute", async () => {
    const d = await dispatcher();
    const answer = await d.call(charge, { orderId: "o1", amount: 100 }, { taskId: "t1", stepId: "s1" });
    await d.close();
    await settled();
    expect(answer).toMatchObject({ result: { chargeId: "ch_o1_1" }, replayed: false, enqueues: 1 });
    expect(tree(spans.getFinishedSpans())).toBe(
      ["call charge_customer", "  send q", "    process q [acquired]", "      effect charge_customer"].join(
        "\n",
      ),
    );
    const all = spans.getFinishedSpans();
    expect(new Set(all.map((s) => s.spanContext().traceId)).size).toBe(1);
    const [process] = named("process q");
    const key = deriveKey({ taskId: "t1", stepId: "s1" });
    expect(process?.kind).toBe(4 /* CONSUMER */);
    expect(process?.attributes).toEqual({
      "messaging.system": "bullmq",
      "messaging.operation.type": "process",
      "messaging.destination.name": queueName,
      "messaging.message.id": jobIdForKey(key),
      "once.key": key,
      "once.tool": "charge_customer",
      "once.kind": "effect",
      "once.namespace": "default",
      "once.task_id": "t1",
      "once.step_id": "s1",
      "once.outcome": "acquired",
      "once.fence": 1,
      "once.attempt": 1,
    });
    expect(named("send q")[0]?.kind).toBe(3 /* PRODUCER */);
    expect(named("call charge_customer")[0]?.attributes).toMatchObject({
      "once.replayed": false,
      "once.enqueues": 1,
    });
    expect(all.every((s) => s.status.code !== SpanStatusCode.ERROR)).toBe(true);

    const collected = await metricReader.collect();
    const points = collected.resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
    const outcomes = points.find((m) => m.descriptor.name === "once.outcomes");
    expect(outcomes?.dataPoints).toContainEqual(
      expect.objectContaining({ attributes: { "once.tool": "charge_customer", "once.outcome": "acquired" } }),
    );
    const claim = points.find((m) => m.descriptor.name === "once.claim.duration");
    const histogram = claim?.dataPoints[0]?.value as { count: number } | undefined;
    expect(histogram?.count).toBeGreaterThanOrEqual(1);
  });

  it("a timeout and retry, then a replay that links to the attempt that executed", async () => {
    let release!: () => void;
    gate = new Promise((resolve) => {
      release = resolve;
    });
    const d = await dispatcher({ timeoutMs: 150, retries: 1 });
    const input = { orderId: "o2", amount: 5 };
    await expect(d.call(charge, input, { taskId: "t2", stepId: "s1" })).rejects.toThrow(DispatchTimeoutError);
    release();
    await expect
      .poll(async () => (await store.get(deriveKey({ taskId: "t2", stepId: "s1" })))?.state)
      .toBe("done");
    const first = named("call charge_customer")[0];
    expect(first?.events.filter((e) => e.name === "once.timeout")).toHaveLength(2);
    expect(first?.status.code).toBe(SpanStatusCode.ERROR);
    expect(first?.attributes["error.type"]).toBe("DispatchTimeoutError");
    expect(named("send q")).toHaveLength(2);

    // The orchestrator calls the step again: the store answers, nothing is enqueued.
    spans.reset();
    const again = await d.call(charge, input, { taskId: "t2", stepId: "s1" });
    expect(again).toMatchObject({ replayed: true, enqueues: 0, result: { chargeId: "ch_o2_1" } });
    expect(tree(spans.getFinishedSpans())).toBe("call charge_customer");
    expect(eventNames(named("call charge_customer")[0] as ReadableSpan)).toContain("once.dedup_hit");
    await d.close();

    // A job re-delivered for the same key (BullMQ re-run, or re-added after removal) replays in the worker.
    const executed = (await store.get(deriveKey({ taskId: "t2", stepId: "s1" })))?.trace;
    await queue.remove(jobIdForKey(deriveKey({ taskId: "t2", stepId: "s1" })));
    spans.reset();
    const replayed = await addRaw("t2", "s1", input);
    await settled();
    expect(replayed).toMatchObject({ outcome: "replay", result: { chargeId: "ch_o2_1" } });
    const [process] = named("process q");
    expect(process?.attributes["once.outcome"]).toBe("replay");
    expect(eventNames(process as ReadableSpan)).toContain("once.dedup_hit");
    expect(process?.status.code).toBe(SpanStatusCode.UNSET);
    const link = process?.links[0]?.context as SpanContext;
    expect(`00-${link.traceId}-${link.spanId}-01`).toBe(executed);
    expect(effects).toBe(1);
  });

  it("an in-flight wait is an event, not an error, and the job comes back without using an attempt", async () => {
    const key = deriveKey({ taskId: "t3", stepId: "s1" });
    const input = { orderId: "o3", amount: 7 };
    const { fingerprint } = await import("@once/core");
    const other = await store.claim({
      key,
      fingerprint: fingerprint(charge.name, input),
      tool: charge.name,
      phase: "effect",
      // Long enough that the other owner completes before its lease runs out on a loaded machine (else the
      // next attempt reconciles instead of replaying); the job waits this long at most.
      leaseMs: 3_000,
    });
    if (other.outcome !== "acquired") throw new Error(other.outcome);
    const d = await dispatcher();
    const call = d.call(charge, input, { taskId: "t3", stepId: "s1" });
    await expect.poll(() => named("process q").length).toBe(1);
    await store.complete(key, other.token, JSON.stringify({ chargeId: "ch_other" }));
    const answer = await call;
    await d.close();
    await settled();
    expect(answer).toMatchObject({ replayed: true, result: { chargeId: "ch_other" } });
    const [waited, replayed] = named("process q");
    expect(waited?.attributes["once.outcome"]).toBe("in_flight");
    expect(eventNames(waited as ReadableSpan)).toContain("once.in_flight");
    expect(waited?.status.code).toBe(SpanStatusCode.UNSET);
    expect(replayed?.attributes).toMatchObject({ "once.outcome": "replay", "once.attempt": 1 });
    expect(effects).toBe(0);
  });

  it("a conflict is an error event on the dispatcher and on the worker", async () => {
    const d = await dispatcher();
    await d.call(charge, { orderId: "o4", amount: 1 }, { taskId: "t4", stepId: "s1" });
    spans.reset();
    await expect(
      d.call(charge, { orderId: "o4", amount: 2 }, { taskId: "t4", stepId: "s1" }),
    ).rejects.toThrow(IdempotencyConflictError);
    await d.close();
    expect(named("call charge_customer")[0]?.attributes["error.type"]).toBe("IdempotencyConflictError");
    await queue.remove(jobIdForKey(deriveKey({ taskId: "t4", stepId: "s1" })));
    await expect(addRaw("t4", "s1", { orderId: "o4", amount: 3 })).rejects.toThrow(
      /IdempotencyConflictError/,
    );
    await settled();
    const [process] = named("process q");
    expect(process?.attributes["once.outcome"]).toBe("conflict");
    expect(eventNames(process as ReadableSpan)).toContain("once.conflict");
    expect(process?.status.code).toBe(SpanStatusCode.ERROR);
    expect(effects).toBe(1);
  });

  it("a takeover after a prepare-phase owner's lease ran out", async () => {
    const key = deriveKey({ taskId: "t5", stepId: "s1" });
    const input = { orderId: "o5", amount: 1 };
    const { fingerprint } = await import("@once/core");
    await store.claim({
      key,
      fingerprint: fingerprint(charge.name, input),
      tool: charge.name,
      phase: "prepare",
      leaseMs: 100,
    });
    await new Promise((resolve) => setTimeout(resolve, 150));
    const d = await dispatcher();
    const answer = await d.call(charge, input, { taskId: "t5", stepId: "s1" });
    await d.close();
    await settled();
    expect(answer.result).toEqual({ chargeId: "ch_o5_2" });
    const [process] = named("process q");
    expect(process?.attributes).toMatchObject({ "once.outcome": "takeover", "once.fence": 2 });
    expect(process?.events.find((e) => e.name === "once.takeover")?.attributes).toEqual({ "once.fence": 2 });
  });

  it("a reconcile asks the tool's hook in a span of its own", async () => {
    const key = deriveKey({ taskId: "t6", stepId: "s1" });
    const input = { orderId: "o6", amount: 1 };
    const { fingerprint } = await import("@once/core");
    const owner = await store.claim({
      key,
      fingerprint: fingerprint(charge.name, input),
      tool: charge.name,
      phase: "effect",
      leaseMs: 5_000,
    });
    if (owner.outcome !== "acquired") throw new Error(owner.outcome);
    await store.markUnknown(key, owner.token, { name: "Error", message: "socket hang up" });
    const d = await dispatcher();
    const answer = await d.call(charge, input, { taskId: "t6", stepId: "s1" });
    await d.close();
    await settled();
    expect(answer.result).toEqual({ chargeId: "ch_o6_found" });
    expect(tree(spans.getFinishedSpans())).toBe(
      [
        "call charge_customer",
        "  send q",
        "    process q [reconcile]",
        "      reconcile charge_customer",
      ].join("\n"),
    );
    const [process] = named("process q");
    expect(process?.events.find((e) => e.name === "once.reconcile")?.attributes).toEqual({
      "once.fence": 2,
      "once.from": "unknown",
    });
    expect(named("reconcile charge_customer")[0]?.attributes["once.applied"]).toBe(true);
    expect(effects).toBe(0);
  });

  it("a lost lease is an error: the late completion is refused and traced", async () => {
    const key = deriveKey({ taskId: "t7", stepId: "s1" });
    const input = { orderId: "o7", amount: 1 };
    const { fingerprint } = await import("@once/core");
    onRun = async () => {
      // Stall past the 300 ms lease with no heartbeat (the event loop is blocked), then let another owner in.
      const until = Date.now() + 450;
      while (Date.now() < until) {}
      const thief = await store.claim({
        key,
        fingerprint: fingerprint(charge.name, input),
        tool: charge.name,
        phase: "effect",
        leaseMs: 5_000,
      });
      expect(thief.outcome).toBe("reconcile");
    };
    const d = await dispatcher();
    await expect(d.call(charge, input, { taskId: "t7", stepId: "s1" })).rejects.toThrow();
    await d.close();
    await settled();
    const [process] = named("process q");
    expect(eventNames(process as ReadableSpan)).toContain("once.lease_lost");
    expect(process?.status.code).toBe(SpanStatusCode.ERROR);
    expect(process?.attributes["error.type"]).toBe("LeaseLostError");
    expect((await store.get(key))?.state).toBe("reconciling");
  });

  it("keeps inputs, results and error messages out of spans unless payloads are opted in", async () => {
    const input = { orderId: "declined", amount: 1, card: SECRET };
    const d = await dispatcher();
    await expect(d.call(charge, input, { taskId: "t8", stepId: "s1" })).rejects.toThrow();
    await d.close();
    await settled();
    const dump = JSON.stringify(
      spans.getFinishedSpans().map((s) => [s.attributes, s.events, s.status, s.links]),
    );
    expect(named("effect charge_customer")[0]?.attributes["error.type"]).toBe("RangeError");
    expect(dump).not.toContain(SECRET);

    // The same call with payloads opted in does carry it: the check above can fail.
    spans.reset();
    const open = await Dispatcher.create({
      queue,
      store,
      tools,
      timeoutMs: 5_000,
      retries: 0,
      telemetry: { recordPayloads: true },
    });
    await expect(open.call(charge, input, { taskId: "t8", stepId: "s1" })).rejects.toThrow();
    await open.close();
    expect(JSON.stringify(spans.getFinishedSpans().map((s) => s.attributes))).toContain(SECRET);
  });
});
