import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Dispatcher } from "@once/bullmq";
import { keyLayout, orderAgentTools, RedisOrderBook } from "@once/order-agent";
import { type PaymentsServer, startPaymentsServer } from "@once/payments";
import { RedisStore } from "@once/redis";
import { cleanupPrefix } from "@once/support";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The built entry point: src/index.ts would point WORKER_MAIN at src/main.js, which does not exist.
const WORKER_MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url));
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
let payments: PaymentsServer;
let redis: Redis;
const layout = keyLayout(`once-test:worker:${randomBytes(4).toString("hex")}:`);

beforeAll(async () => {
  payments = await startPaymentsServer({ latency: "none" });
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await payments.close();
  await cleanupPrefix(redis, layout.root);
  await redis.quit();
});

describe("the worker process", () => {
  it("prints a ready line, runs the order agent's tools through once, and exits 0 on SIGTERM", async () => {
    expect(existsSync(WORKER_MAIN), "build @once/worker before testing its CLI").toBe(true);
    const queueName = `worker-test-${randomBytes(4).toString("hex")}`;
    const child = spawn(
      process.execPath,
      [
        WORKER_MAIN,
        "--queue",
        queueName,
        "--prefix",
        layout.root,
        "--payments-url",
        payments.url,
        "--concurrency",
        "4",
      ],
      { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, REDIS_URL: redisUrl } },
    );
    const exited = once(child, "exit");
    const queue = new Queue(queueName, { connection: redis, prefix: layout.bull });
    let dispatcher: Dispatcher | undefined;
    try {
      const [line] = (await once(createInterface({ input: child.stdout }), "line")) as [string];
      expect(JSON.parse(line)).toMatchObject({
        type: "ready",
        queue: queueName,
        prefix: layout.root,
        concurrency: 4,
      });

      const orders = new RedisOrderBook({ redis, prefix: layout.orders });
      await orders.create({
        orderId: "w-1",
        status: "pending",
        amount: 4200,
        currency: "eur",
        email: "w@example.com",
      });
      const tools = orderAgentTools();
      dispatcher = await Dispatcher.create({
        queue,
        store: await RedisStore.create({ redis, prefix: layout.store }),
        tools: tools.all,
        timeoutMs: 10_000,
        retries: 0,
      });
      const read = await dispatcher.call(tools.getOrderStatus, { orderId: "w-1" });
      expect(read.result).toMatchObject({ status: "pending", amount: 4200 });
      const step = { taskId: "w-task", stepId: "step-2" };
      const first = await dispatcher.call(
        tools.chargeCustomer,
        { orderId: "w-1", amount: 4200, currency: "eur" },
        step,
      );
      const again = await dispatcher.call(
        tools.chargeCustomer,
        { orderId: "w-1", amount: 4200, currency: "eur" },
        step,
      );
      expect(first.replayed).toBe(false);
      expect(again).toMatchObject({ replayed: true, result: first.result });
      expect(payments.ledger().charges.byOrder).toEqual({ "w-1": 1 });
      await dispatcher.call(tools.setStatus, { orderId: "w-1", status: "paid" });
      expect((await orders.get("w-1"))?.status).toBe("paid");
    } finally {
      await dispatcher?.close();
      await queue.close();
      child.kill("SIGTERM");
    }
    expect(await exited).toEqual([0, null]);
  });

  it("refuses a bad flag with exit code 2", async () => {
    const child = spawn(process.execPath, [WORKER_MAIN, "--concurrency", "zero"], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk;
    });
    expect(await once(child, "exit")).toEqual([2, null]);
    expect(stderr).toContain("--concurrency");
  });
});
