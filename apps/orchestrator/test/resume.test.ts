import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { deriveKey } from "@once/core";
import { keyLayout, RedisOrderBook } from "@once/order-agent";
import { type PaymentsServer, startPaymentsServer } from "@once/payments";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, NodeChild } from "@once/support";
import { WORKER_MAIN } from "@once/worker";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisTaskJournal } from "../src/index.js";

const ORCHESTRATOR_MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url));
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
let redis: Redis;
let payments: PaymentsServer;
const children: NodeChild[] = [];
const roots: string[] = [];

beforeAll(async () => {
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  // Every effect takes 1.5 s: long enough to kill the orchestrator while its charge is in flight.
  payments = await startPaymentsServer({ latency: { fixedMs: 1_500 } });
});
afterAll(async () => {
  await Promise.all(children.map((child) => child.stop()));
  await payments.close();
  for (const root of roots) await cleanupPrefix(redis, root);
  await redis.quit();
});

/** Polls the dedup record of `key` until its state is one of `states`. */
async function untilState(
  store: RedisStore,
  key: string,
  states: string[],
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!states.includes((await store.get(key))?.state ?? "none")) {
    if (Date.now() > deadline) throw new Error(`record ${key} never reached ${states.join(" or ")}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

function start(main: string, args: string[]): NodeChild {
  const child = NodeChild.start({ script: main, args, env: { ...process.env, REDIS_URL: redisUrl } });
  children.push(child);
  return child;
}

describe("a restarted orchestrator", () => {
  it("resumes an interrupted step with the same step id, so the same key: the charge happens once", async () => {
    const id = randomBytes(4).toString("hex");
    const layout = keyLayout(`once-test:resume:${id}:`);
    roots.push(layout.root);
    const queue = `resume-${id}`;
    const common = ["--queue", queue, "--prefix", layout.root];
    const worker = start(WORKER_MAIN, [...common, "--payments-url", payments.url]);
    await worker.waitFor("ready");

    const orchestratorArgs = [
      ...common,
      "--mode",
      "once",
      "--tasks",
      "1",
      "--task-prefix",
      `resume-${id}`,
      "--seed-orders",
      "--events",
      "--timeout-ms",
      "400",
    ];
    const first = start(ORCHESTRATOR_MAIN, orchestratorArgs);
    const started = await first.waitFor(
      (line) => line.tool === "charge_customer" && line.phase === "started",
    );
    // Killed mid-call: once the worker holds the key, the charge is running and the journal says "started".
    const store = await RedisStore.create({ redis, prefix: layout.store, checks: false });
    await untilState(store, String(started.key), ["claimed"]);
    await first.kill("SIGKILL");

    const taskId = `resume-${id}-1`;
    const orderId = `resume-${id}-order-1`;
    expect(started).toMatchObject({ taskId, n: 2, stepId: "step-2" });
    expect(started.key).toBe(deriveKey({ taskId, stepId: "step-2" }));
    const journal = new RedisTaskJournal({ redis, prefix: layout.journal });
    expect((await journal.load(taskId)).map((step) => [step.stepId, step.tool, step.state])).toEqual([
      ["step-1", "get_order_status", "done"],
      ["step-2", "charge_customer", "started"],
    ]);

    // Let the orphaned call finish, so the restarted orchestrator finds it done in the store.
    await untilState(store, String(started.key), ["done"]);

    const second = start(ORCHESTRATOR_MAIN, orchestratorArgs);
    expect(await second.exited).toEqual([0, null]);
    const steps = second.events.filter((line) => line.type === "step");
    expect(steps.find((line) => line.tool === "charge_customer" && line.phase === "resumed")).toMatchObject({
      stepId: "step-2",
      key: started.key,
    });
    expect(steps.find((line) => line.tool === "charge_customer" && line.phase === "done")).toMatchObject({
      replayed: true,
      key: started.key,
    });
    // The read was not repeated: its journaled result was reused.
    expect(steps.filter((line) => line.tool === "get_order_status")).toEqual([]);

    expect(payments.ledger().charges.byOrder[orderId]).toBe(1);
    expect(payments.ledger().emails.byOrder[orderId]).toBe(1);
    expect((await new RedisOrderBook({ redis, prefix: layout.orders }).get(orderId))?.status).toBe("paid");
    expect((await journal.load(taskId)).map((step) => [step.stepId, step.tool, step.state])).toEqual([
      ["step-1", "get_order_status", "done"],
      ["step-2", "charge_customer", "done"],
      ["step-3", "send_email", "done"],
      ["step-4", "set_status", "done"],
    ]);
    // Replayed: the charge (answered from the store), and any later step whose retry, after a timeout, found
    // the job its first attempt had enqueued (that call ran nothing) — the summary counts what the steps said.
    const replayed = steps.filter((line) => line.phase === "done" && line.replayed === true);
    expect(replayed.map((line) => line.stepId)).toContain("step-2");
    expect(second.events.at(-1)).toMatchObject({
      type: "summary",
      tasksOk: 1,
      replayedCalls: replayed.length,
    });
  });

  it("still in flight when it resumes: waits for the running call instead of firing another", async () => {
    const id = randomBytes(4).toString("hex");
    const layout = keyLayout(`once-test:resume:${id}:`);
    roots.push(layout.root);
    const common = ["--queue", `resume-${id}`, "--prefix", layout.root];
    const worker = start(WORKER_MAIN, [...common, "--payments-url", payments.url]);
    await worker.waitFor("ready");
    const args = [
      ...common,
      "--mode",
      "once",
      "--tasks",
      "1",
      "--task-prefix",
      `inflight-${id}`,
      "--seed-orders",
      "--events",
    ];
    const first = start(ORCHESTRATOR_MAIN, args);
    const started = await first.waitFor(
      (line) => line.tool === "charge_customer" && line.phase === "started",
    );
    const store = await RedisStore.create({ redis, prefix: layout.store, checks: false });
    await untilState(store, String(started.key), ["claimed"]);
    await first.kill("SIGKILL");

    // Restarted at once: the charge is still running on the worker (1.5 s).
    const second = start(ORCHESTRATOR_MAIN, args);
    expect(await second.exited).toEqual([0, null]);
    expect(
      second.events.find((line) => line.tool === "charge_customer" && line.phase === "resumed"),
    ).toMatchObject({
      key: started.key,
    });
    expect(
      second.events.find((line) => line.tool === "charge_customer" && line.phase === "done"),
    ).toMatchObject({
      key: started.key,
    });
    expect(
      second.events.find((line) => line.tool === "charge_customer" && line.phase === "done"),
    ).toMatchObject({
      key: started.key,
    });
    expect(payments.ledger().charges.byOrder[`inflight-${id}-order-1`]).toBe(1);
  });
});
