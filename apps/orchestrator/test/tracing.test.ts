import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { keyLayout } from "@once/order-agent";
import { type PaymentsServer, startPaymentsServer } from "@once/payments";
import { cleanupPrefix, NodeChild } from "@once/support";
import { type OtlpReceiver, type ReceivedSpan, SPAN_KIND, startOtlpReceiver } from "@once/trace-receiver";
import { WORKER_MAIN } from "@once/worker";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Issue 4, end to end: two real processes export OTLP/HTTP JSON to a receiver in this test (a node:http
// server taking POST /v1/traces, from @once/trace-receiver), and the receiver must find one trace holding the
// orchestrator's and the worker's spans of one call.
const ORCHESTRATOR_MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url));
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
let redis: Redis;
let payments: PaymentsServer;
let receiver: OtlpReceiver;
const children: NodeChild[] = [];
const roots: string[] = [];

beforeAll(async () => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  payments = await startPaymentsServer({ latency: "none" });
  receiver = await startOtlpReceiver();
});
afterAll(async () => {
  await Promise.all(children.map((child) => child.stop()));
  await receiver.close();
  await payments.close();
  for (const root of roots) await cleanupPrefix(redis, root);
  await redis.quit();
});

describe("one task, two processes, one trace", () => {
  it.each(["http/json"] as const)("exported as %s", async (protocol) => {
    const id = randomBytes(4).toString("hex");
    const layout = keyLayout(`once-test:tracing:${id}:`);
    roots.push(layout.root);
    const queue = `tracing-${id}`;
    const withoutOtel = Object.fromEntries(
      Object.entries(process.env).filter(([name]) => !name.startsWith("OTEL_")),
    );
    const env = {
      ...withoutOtel,
      REDIS_URL: redisUrl,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
    };
    const common = ["--queue", queue, "--prefix", layout.root];
    const worker = NodeChild.start({
      script: WORKER_MAIN,
      args: [...common, "--payments-url", payments.url],
      env,
    });
    children.push(worker);
    expect(await worker.waitFor("ready")).toMatchObject({ tracing: true });

    const taskPrefix = `traced-${id}`;
    const orchestrator = NodeChild.start({
      script: ORCHESTRATOR_MAIN,
      // A wait longer than the default 1 s: on a loaded machine a call that outlived it was sent again, a
      // second `call` span in the trace this test counts.
      args: [
        ...common,
        ...["--mode", "once", "--tasks", "1", "--task-prefix", taskPrefix, "--seed-orders"],
        ...["--timeout-ms", "20000"],
      ],
      env,
    });
    children.push(orchestrator);
    expect(await orchestrator.exited).toEqual([0, null]);
    // The worker flushes its spans on SIGTERM, the orchestrator did on exit.
    expect(await worker.stop()).toEqual([0, null]);

    const taskId = `${taskPrefix}-1`;
    const before = receiver.requests.json;
    expect(before).toBeGreaterThan(0);
    const spans = await receiver.waitFor((all) =>
      all.some((span) => span.name === `task ${taskId}` && span.serviceName === "once-orchestrator"),
    );
    const root = spans.find((span) => span.name === `task ${taskId}`) as ReceivedSpan;
    const trace = spans.filter((span) => span.traceId === root.traceId);
    const byId = new Map(trace.map((span) => [span.spanId, span]));
    const one = (name: string, service: string) => {
      const found = trace.filter((span) => span.name === name && span.serviceName === service);
      expect(found, `${name} from ${service}`).toHaveLength(1);
      return found[0] as ReceivedSpan;
    };

    const call = one("call charge_customer", "once-orchestrator");
    const consumer = consumerOf(trace, queue, "charge_customer");
    const effect = one("effect charge_customer", "once-worker");
    const send = byId.get(consumer.parentSpanId ?? "");

    // task → call → send (producer) → process (consumer, other process) → effect
    expect(root.parentSpanId).toBeUndefined();
    expect(call.parentSpanId).toBe(root.spanId);
    expect(send).toMatchObject({
      name: `send ${queue}`,
      kind: SPAN_KIND.producer,
      serviceName: "once-orchestrator",
    });
    expect(send?.parentSpanId).toBe(call.spanId);
    expect(consumer.kind).toBe(SPAN_KIND.consumer);
    expect(consumer.serviceName).toBe("once-worker");
    expect(effect.parentSpanId).toBe(consumer.spanId);
    expect(consumer.attributes).toMatchObject({
      "messaging.system": "bullmq",
      "messaging.operation.type": "process",
      "messaging.destination.name": queue,
      "once.tool": "charge_customer",
      "once.kind": "effect",
      "once.task_id": taskId,
      "once.step_id": "step-2",
      "once.outcome": "acquired",
      "once.attempt": 1,
      "once.fence": 1,
    });
    expect(consumer.attributes["once.key"]).toMatch(/^[0-9a-f]{64}$/);
    expect(call.attributes["once.key"]).toBe(consumer.attributes["once.key"]);

    // Every call of the task is in this one trace, from both services.
    const calls = trace.filter((span) => span.name.startsWith("call ")).map((span) => span.name);
    expect(calls).toEqual(
      expect.arrayContaining([
        "call get_order_status",
        "call charge_customer",
        "call send_email",
        "call set_status",
      ]),
    );
    expect(new Set(trace.map((span) => span.serviceName))).toEqual(
      new Set(["once-orchestrator", "once-worker"]),
    );
  });
});

/** The worker's `process <queue>` consumer span (one per job) of the job that ran `tool`. */
function consumerOf(trace: ReceivedSpan[], queue: string, tool: string): ReceivedSpan {
  const found = trace.filter(
    (span) =>
      span.name === `process ${queue}` &&
      span.kind === SPAN_KIND.consumer &&
      span.serviceName === "once-worker" &&
      span.attributes["once.tool"] === tool,
  );
  expect(found, `process ${queue} for ${tool} from once-worker`).toHaveLength(1);
  return found[0] as ReceivedSpan;
}
