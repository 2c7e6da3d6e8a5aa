import { type AnyTool, defineTool } from "@once/core";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { type Harness, startHarness } from "./harness.js";

/** What each tool's `ctx.signal` said, by tool: filled in when it aborts. */
const aborted = new Map<string, unknown>();
const started = new Map<string, () => void>();

function waitingTool(name: string, kind: "read" | "effect"): AnyTool {
  return defineTool({
    name,
    kind,
    input: z.object({}),
    output: z.object({}),
    run: (_input, ctx) =>
      new Promise((_resolve, reject) => {
        ctx.signal.addEventListener("abort", () => {
          aborted.set(name, ctx.signal.reason);
          reject(ctx.signal.reason);
        });
        started.get(name)?.();
      }),
  });
}

const read = waitingTool("wait_read", "read");
const effect = waitingTool("wait_effect", "effect");

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("BullMQ's abort signal reaches the tool's ctx.signal", () => {
  it.each([
    { tool: read, step: undefined },
    { tool: effect, step: { taskId: "t-abort", stepId: "s" } },
  ])("$tool.kind tool: cancelling the job aborts the running tool", async ({ tool, step }) => {
    h = await startHarness([read, effect]);
    const d = await h.dispatcher({ timeoutMs: 10_000 });
    const running = new Promise<void>((resolve) => started.set(tool.name, resolve));
    const call = (d.call as (t: AnyTool, i: unknown, o?: unknown) => Promise<unknown>)(tool, {}, step);
    call.catch(() => {});
    await running;
    const [active] = await h.queue.getJobs(["active"]);
    expect(h.worker.worker.cancelJob(String(active?.id), "operator cancelled")).toBe(true);
    await expect.poll(() => aborted.has(tool.name)).toBe(true);
    expect(String(aborted.get(tool.name))).toContain("operator cancelled");
  });
});
