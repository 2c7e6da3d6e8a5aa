import {
  CallFailedError,
  IdempotencyConflictError,
  OutcomeUnknownError,
  ReplayedFailureError,
} from "@once/core";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import { Queue, QueueEvents, Worker } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KeyMismatchError } from "../src/index.js";
import {
  CALL_VERSION,
  type CallData,
  failedErrorName,
  onceErrorIn,
  parseCallData,
  unrecoverable,
} from "../src/wire.js";

// Through a real BullMQ queue and worker: what the worker throws is what the dispatcher reads back.
let redis: Redis;
let queue: Queue;
let events: QueueEvents;
let worker: Worker;
const prefix = randomPrefix("wire");
const thrown = new Map<string, Error>();
const received = new Map<string, unknown>();

beforeAll(async () => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  queue = new Queue("wire", { connection: redis, prefix });
  events = new QueueEvents("wire", { connection: redis.duplicate(), prefix });
  worker = new Worker(
    "wire",
    async (job) => {
      received.set(String(job.id), job.data);
      const error = thrown.get(String(job.id));
      if (error) throw error;
      return { ok: true };
    },
    { connection: redis.duplicate(), prefix },
  );
  await Promise.all([events.waitUntilReady(), worker.waitUntilReady()]);
});

afterAll(async () => {
  await worker.close();
  await events.close();
  await queue.obliterate({ force: true });
  await queue.close();
  await cleanupPrefix(redis, `${prefix}:`);
  redis.disconnect();
});

async function failWith(id: string, error: Error): Promise<string> {
  thrown.set(id, error);
  const job = await queue.add("t", {}, { jobId: id, attempts: 3 });
  await job.waitUntilFinished(events, 10_000).catch(() => {});
  const failed = await queue.getJob(id);
  expect(failed?.attemptsMade, "an unrecoverable failure is not retried").toBe(1);
  return failed?.failedReason ?? "";
}

describe("the wire between dispatcher and worker", () => {
  it.each([
    new ReplayedFailureError("k".repeat(64), { name: "CardDeclined", message: "declined" }),
    new IdempotencyConflictError("k".repeat(64), "charge", "refund"),
    new OutcomeUnknownError("k".repeat(64), "charge", "the tool has no reconcile hook"),
    new KeyMismatchError("once-x", "once-y"),
    new CallFailedError("k".repeat(64), "charge", { name: "CardDeclined", message: "declined" }),
  ])("a $name thrown unrecoverably reaches the dispatcher by name, not retried", async (error) => {
    const reason = await failWith(`fail-${error.name}`, unrecoverable(error));
    expect(failedErrorName(reason)).toBe(error.name);
    expect(reason).toBe(`${error.name}: ${error.message}`);
  });

  it("a wrapped once error is found inside its wrapper; other errors carry no once error", () => {
    const error = new ReplayedFailureError("k".repeat(64), { name: "E", message: "m" });
    expect(onceErrorIn(unrecoverable(error))).toBe(error);
    expect(onceErrorIn(error)).toBe(error);
    expect(onceErrorIn(new Error("plain"))).toBeUndefined();
    expect(onceErrorIn(unrecoverable(new TypeError("plain")))).toBeUndefined();
    expect(failedErrorName("socket hang up")).toBeUndefined();
  });

  it("the job data a dispatcher writes is the job data a worker parses", async () => {
    const data = {
      v: CALL_VERSION,
      tool: "charge",
      kind: "effect",
      callId: "c-1",
      namespace: "default",
      taskId: "t",
      stepId: "s",
      input: { amount: 100, nested: { list: [1, "two", null] } },
      trace: { traceparent: `00-${"a".repeat(32)}-${"b".repeat(16)}-01` },
    } satisfies CallData;
    const job = await queue.add("charge", data, { jobId: "data-1" });
    await job.waitUntilFinished(events, 10_000);
    expect(parseCallData(received.get("data-1"))).toEqual(data);
  });
});
