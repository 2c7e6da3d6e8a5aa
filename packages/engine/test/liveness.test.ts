import { defineTool, type EffectContext, LeaseLostError, MemoryStore, type OnceStore } from "@once/core";
import { wrapStore } from "@once/core/store-kit";
import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { InProcess } from "../src/index.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An effect tool that stops until `release` is called, and tells the test its context. */
function gatedTool(name = "charge") {
  const entered: EffectContext[] = [];
  const waiting: (() => void)[] = [];
  const tool = defineTool({
    name,
    kind: "effect",
    input: z.object({ id: z.string() }),
    output: z.object({ id: z.string() }),
    run: async (input, ctx) => {
      entered.push(ctx);
      await new Promise<void>((resolve) => waiting.push(resolve));
      await ctx.assertLease();
      return { id: input.id };
    },
  });
  return {
    tool,
    entered,
    release: () => {
      for (const go of waiting.splice(0)) go();
    },
  };
}

async function until(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error("timed out");
    await sleep(5);
  }
}

describe("liveness per process", () => {
  it("names one entry on every claim of the process, across calls and engines on the same store", async () => {
    const store = new MemoryStore();
    const gate = gatedTool();
    const first = new InProcess({ store, tools: [gate.tool] });
    const second = new InProcess({ store, tools: [gate.tool] });
    const calls = [
      first.call(gate.tool, { id: "a" }, { taskId: "t", stepId: "a" }),
      first.call(gate.tool, { id: "b" }, { taskId: "t", stepId: "b" }),
      second.call(gate.tool, { id: "c" }, { taskId: "t", stepId: "c" }),
    ];
    await until(() => gate.entered.length === 3);
    const named = await Promise.all(gate.entered.map((ctx) => store.get(ctx.key)));
    const ids = new Set(named.map((record) => record?.liveness));
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(/^[0-9a-f]{16}$/);
    gate.release();
    expect((await Promise.all(calls)).map((answer) => answer.outcome)).toEqual([
      "executed",
      "executed",
      "executed",
    ]);
  });

  it("liveness: false names no entry: only the lease says the owner is alive", async () => {
    const store = new MemoryStore();
    const gate = gatedTool();
    const runner = new InProcess({ store, tools: [gate.tool], liveness: false });
    const call = runner.call(gate.tool, { id: "a" }, { taskId: "t", stepId: "a" });
    await until(() => gate.entered.length === 1);
    const ctx = gate.entered[0] as EffectContext;
    expect((await store.get(ctx.key))?.liveness).toBeUndefined();
    gate.release();
    expect((await call).outcome).toBe("executed");
  });

  it("an owner whose entry is gone is told at once: its signal aborts, and its last look at the lease throws", async () => {
    const store = new MemoryStore();
    const gate = gatedTool();
    const runner = new InProcess({ store, tools: [gate.tool], liveness: { ttlMs: 400 }, attempts: 1 });
    const call = runner.call(gate.tool, { id: "a" }, { taskId: "t", stepId: "a" });
    const answer = call.then(
      () => undefined,
      (error: unknown) => error,
    );
    await until(() => gate.entered.length === 1);
    const ctx = gate.entered[0] as EffectContext;
    const record = await store.get(ctx.key);
    // As if the process had stalled past its entry: another process's claim now reconciles.
    await store.endLiveness(record?.liveness ?? "");
    await until(() => ctx.signal.aborted, 1_000);
    expect(ctx.signal.reason).toBeInstanceOf(LeaseLostError);
    const next = await store.claim({
      key: ctx.key,
      fingerprint: record?.fingerprint ?? "",
      tool: "charge",
      phase: "effect",
      leaseMs: 30_000,
    });
    expect(next).toMatchObject({ outcome: "reconcile", from: "claimed", fence: 2 });
    gate.release();
    expect(await answer).toBeInstanceOf(LeaseLostError);
  });

  it("renews its entry while it holds a claim, so a call longer than the entry's time keeps its claim", async () => {
    const store = new MemoryStore();
    const gate = gatedTool();
    const runner = new InProcess({ store, tools: [gate.tool], liveness: { ttlMs: 300 } });
    const call = runner.call(gate.tool, { id: "a" }, { taskId: "t", stepId: "a" });
    await until(() => gate.entered.length === 1);
    const ctx = gate.entered[0] as EffectContext;
    await sleep(900); // three times the entry's time to live
    const record = await store.get(ctx.key);
    const next = await store.claim({
      key: ctx.key,
      fingerprint: record?.fingerprint ?? "",
      tool: "charge",
      phase: "effect",
      leaseMs: 30_000,
    });
    expect(next).toMatchObject({ outcome: "in_flight", fence: 1 });
    expect(ctx.signal.aborted).toBe(false);
    gate.release();
    expect((await call).outcome).toBe("executed");
  });
});

describe("a store that keeps no liveness entries", () => {
  /** A wrapper that lists OnceStore's methods and forgot the liveness ones, as the demo's once did. */
  const withoutLiveness = (store: MemoryStore): OnceStore =>
    wrapStore(store, { openLiveness: undefined, renewLiveness: undefined, endLiveness: undefined });

  it("is warned of once per store (ONCE_NO_LIVENESS), and not at all with liveness: false or a store that keeps them", () => {
    const warn = vi.spyOn(process, "emitWarning").mockImplementation(() => {});
    try {
      const { tool } = gatedTool();
      const bare = withoutLiveness(new MemoryStore());
      new InProcess({ store: bare, tools: [tool] });
      new InProcess({ store: bare, tools: [tool] });
      new InProcess({ store: withoutLiveness(new MemoryStore()), tools: [tool], liveness: false });
      new InProcess({ store: new MemoryStore(), tools: [tool] });
      expect(warn).toHaveBeenCalledTimes(1);
      const [message, options] = warn.mock.calls[0] as [string, { code: string }];
      expect(options.code).toBe("ONCE_NO_LIVENESS");
      expect(message).toContain("keeps no liveness entries (openLiveness, renewLiveness, endLiveness)");
      expect(message).toContain("pass `liveness: false`");
    } finally {
      warn.mockRestore();
    }
  });
});
