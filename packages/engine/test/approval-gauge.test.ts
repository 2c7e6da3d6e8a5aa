// once.approvals.pending counts what the store holds, whichever process asked and whoever decided: requests
// made by one entry point, one decided by an operator, the gauge read through a real OpenTelemetry SDK.

import { defineTool } from "@once/core";
import { RedisOperatorStore, RedisStore } from "@once/redis";
import { cleanupPrefix, pollUntil, randomPrefix, redisUrl } from "@once/support";
import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { InProcess, observePendingApprovals } from "../src/index.js";

/** A reader collected on demand: the test says when the exporter would have looked. */
class OnDemandReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

let redis: Redis;
const prefix = randomPrefix("approval-gauge");

beforeAll(() => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
});

afterAll(async () => {
  await cleanupPrefix(redis, prefix);
  redis.disconnect();
});

const refund = defineTool({
  name: "refund",
  kind: "effect",
  input: z.object({ amount: z.number() }),
  output: z.object({ refunded: z.number() }),
  approval: true,
  run: (input) => ({ refunded: input.amount }),
});

async function pendingPoints(reader: MetricReader): Promise<number[]> {
  const { resourceMetrics } = await reader.collect();
  return resourceMetrics.scopeMetrics
    .flatMap((scope) => scope.metrics)
    .filter((metric) => metric.descriptor.name === "once.approvals.pending")
    .flatMap((metric) => metric.dataPoints.map((point) => Number(point.value)));
}

describe("observePendingApprovals", () => {
  it("reports the requests waiting in the store, and follows a decision made elsewhere", async () => {
    const store = await RedisStore.create({ redis, prefix });
    const operator = new RedisOperatorStore({ redis, prefix });
    const once = new InProcess({ store, tools: [refund] });
    const keys: string[] = [];
    for (const stepId of ["a", "b", "c"]) {
      const error = await once
        .call(refund, { amount: 5 }, { taskId: "gauge", stepId })
        .catch((e: unknown) => e);
      keys.push((error as { key: string }).key);
    }

    const reader = new OnDemandReader();
    const provider = new MeterProvider({ readers: [reader] });
    const gauge = observePendingApprovals(operator, { meter: provider.getMeter("test"), intervalMs: 50 });
    try {
      expect(await pollUntil(() => gauge.pending === 3, { timeoutMs: 5_000 })).toBe(true);
      expect(await pendingPoints(reader)).toEqual([3]);

      await operator.approve(keys[0] as string, { by: "alice", why: "checked" });
      expect(await pollUntil(() => gauge.pending === 2, { timeoutMs: 5_000 })).toBe(true);
      expect(await pendingPoints(reader)).toEqual([2]);
    } finally {
      gauge.stop();
      await provider.shutdown();
    }
  });

  it("reports nothing before the first count, and keeps the last count while the store is unreachable", async () => {
    let release: () => void = () => {};
    const firstCount = new Promise<void>((resolve) => {
      release = resolve;
    });
    let fail = false;
    let calls = 0;
    const errors: unknown[] = [];
    const real = new RedisOperatorStore({ redis, prefix });
    const operator = {
      count: async () => {
        calls++;
        await firstCount;
        if (fail) throw new Error("store down");
        return real.count();
      },
    };
    const reader = new OnDemandReader();
    const provider = new MeterProvider({ readers: [reader] });
    const gauge = observePendingApprovals(operator, {
      meter: provider.getMeter("test"),
      intervalMs: 50,
      onError: (error) => errors.push(error),
    });
    try {
      expect(gauge.pending).toBeUndefined();
      expect(await pendingPoints(reader)).toEqual([]);
      release();
      expect(await pollUntil(() => gauge.pending !== undefined, { timeoutMs: 5_000 })).toBe(true);
      const last = gauge.pending;
      fail = true;
      const seen = calls;
      expect(await pollUntil(() => errors.length > 0 && calls > seen, { timeoutMs: 5_000 })).toBe(true);
      expect(gauge.pending).toBe(last);
      expect(await pendingPoints(reader)).toEqual([last]);
    } finally {
      gauge.stop();
      await provider.shutdown();
    }
  });
});
