import {
  defineTool,
  deriveKey,
  InvalidInputError,
  MissingStepIdentityError,
  OutcomeUnknownError,
  UnknownToolError,
} from "@once/core";
import { RetryWindowError } from "@once/engine";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { Dispatcher, jobIdForKey } from "../src/index.js";
import { type Harness, startHarness } from "./harness.js";

/** What the outside world saw, per order: the provider this tool charges. */
const charged = new Map<string, number>();
let failNextRun = false;
let release: Promise<void> = Promise.resolve();

const charge = defineTool({
  name: "charge",
  kind: "effect",
  input: z.object({ orderId: z.string() }),
  output: z.object({ chargeId: z.string() }),
  run: async (input) => {
    await release;
    charged.set(input.orderId, (charged.get(input.orderId) ?? 0) + 1);
    if (failNextRun) {
      failNextRun = false;
      throw new Error("socket hang up"); // after the effect: unknown
    }
    return { chargeId: `ch_${input.orderId}` };
  },
  reconcile: async (input) =>
    charged.has(input.orderId)
      ? { applied: true, result: { chargeId: `ch_${input.orderId}` } }
      : { applied: false },
});
const lookup = defineTool({
  name: "lookup",
  kind: "read",
  input: z.object({ orderId: z.string() }),
  output: z.object({ status: z.string() }),
  run: (input) => ({ status: `status of ${input.orderId}` }),
});

let h: Harness;

beforeEach(async () => {
  charged.clear();
  failNextRun = false;
  release = Promise.resolve();
  h = await startHarness([charge, lookup]);
});

afterEach(async () => {
  await h.close();
});

describe("Dispatcher", () => {
  it("validates before enqueueing anything", async () => {
    const d = await h.dispatcher();
    await expect(d.call(charge, { orderId: 7 } as never, { taskId: "t", stepId: "s" })).rejects.toThrow(
      InvalidInputError,
    );
    // @ts-expect-error effect calls need taskId and stepId
    await expect(d.call(charge, { orderId: "o" })).rejects.toThrow(MissingStepIdentityError);
    const other = defineTool({ ...lookup, name: "other" });
    await expect(d.call(other, { orderId: "o" })).rejects.toThrow(UnknownToolError);
    expect(await h.queue.getJobCounts()).toMatchObject({ waiting: 0, active: 0, completed: 0, failed: 0 });
  });

  it("runs read tools without the store", async () => {
    const d = await h.dispatcher();
    const answer = await d.call(lookup, { orderId: "o1" });
    expect(answer).toMatchObject({ result: { status: "status of o1" }, replayed: false, enqueues: 1 });
    expect(answer.key).toBeUndefined();
  });

  it("gives concurrent callers of one key one result and one job", async () => {
    let open!: () => void;
    release = new Promise((resolve) => {
      open = resolve;
    });
    const d = await h.dispatcher();
    const calls = Array.from({ length: 10 }, () =>
      d.call(charge, { orderId: "o2" }, { taskId: "t2", stepId: "s" }),
    );
    open();
    const answers = await Promise.all(calls);
    expect(new Set(answers.map((a) => a.result.chargeId))).toEqual(new Set(["ch_o2"]));
    expect(charged.get("o2")).toBe(1);
    expect((await h.queue.getJobCounts()).completed).toBe(1);
  });

  it("re-runs a failed job when the step is called again, reconciling an unknown outcome", async () => {
    failNextRun = true;
    const d = await h.dispatcher();
    await expect(d.call(charge, { orderId: "o3" }, { taskId: "t3", stepId: "s" })).rejects.toThrow(
      OutcomeUnknownError,
    );
    const key = deriveKey({ taskId: "t3", stepId: "s" });
    expect((await h.store.get(key))?.state).toBe("unknown");
    expect(await (await h.queue.getJob(jobIdForKey(key)))?.getState()).toBe("failed");

    const again = await d.call(charge, { orderId: "o3" }, { taskId: "t3", stepId: "s" });
    expect(again).toMatchObject({ result: { chargeId: "ch_o3" }, replayed: false });
    expect((await h.store.get(key))?.state).toBe("done");
    expect(charged.get("o3")).toBe(1);
  });

  it("answers from the completed job when the record is gone", async () => {
    const d = await h.dispatcher();
    await d.call(charge, { orderId: "o4" }, { taskId: "t4", stepId: "s" });
    // As if the record had outlived its retention while BullMQ kept the completed job.
    await h.redis.del(`${h.store.prefix}${deriveKey({ taskId: "t4", stepId: "s" })}`);
    const again = await d.call(charge, { orderId: "o4" }, { taskId: "t4", stepId: "s" });
    expect(again).toMatchObject({ result: { chargeId: "ch_o4" }, replayed: true });
    expect(charged.get("o4")).toBe(1);
  });

  it("refuses a retention shorter than its retry window", async () => {
    await expect(
      Dispatcher.create({
        queue: h.queue,
        store: h.store,
        tools: [charge],
        timeoutMs: 60 * 60_000,
        retries: 30,
      }),
    ).rejects.toThrow(RetryWindowError);
  });
});
