import { onceTask } from "@once/ai";
import { defineTool, deriveKey } from "@once/core";
import { InProcess } from "@once/engine";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import type { BenchContext } from "./bench-context.js";
import { interleave, measureOps, type OpsFigures } from "./interleave.js";
import { median } from "./stats.js";

/**
 * What recording an agent's model turns costs, next to what the model itself costs. Each side calls the
 * model's `doGenerate` as the AI SDK's loop would: the mock model alone; the same model through a task, each
 * call a new turn recorded in the store; and through a resumed task, each call a recorded turn replayed. Beside
 * them, an effect tool run in process (claim, heartbeats, complete) next to the store's bare claim + complete.
 */
export interface AgentTurnFigures {
  responseBytes: number;
  /** Median calls/s of each side, and its Node and Redis CPU per call in µs. */
  sides: Record<AgentSide, { callsPerSec: number; nodeCpuUs: number; redisCpuUs: number }>;
}

const AGENT_SIDES = [
  "model",
  "recorded turn",
  "replayed turn",
  "store claim+complete",
  "in-process effect",
] as const;
export type AgentSide = (typeof AGENT_SIDES)[number];

const PARAMS = {
  prompt: [{ role: "user" as const, content: [{ type: "text" as const, text: "settle order 42" }] }],
};

export async function compareAgentTurns(
  ctx: BenchContext,
  options: { responseBytes: number; rounds: number; roundMs: number },
): Promise<AgentTurnFigures> {
  const redis = ctx.target.connect();
  const { RedisStore } = ctx.builds[0] ?? { RedisStore: undefined };
  if (!RedisStore) throw new Error("no build to measure");
  const store = await RedisStore.create({ redis, prefix: `${ctx.prefix}agent:` });
  const text = "x".repeat(options.responseBytes);
  const model = new MockLanguageModelV4({
    doGenerate: async () =>
      ({
        content: [{ type: "text", text }],
        finishReason: { unified: "stop", raw: "stop" },
        usage: { inputTokens: { total: 10 }, outputTokens: { total: 5 } },
        warnings: [],
      }) as never,
  });
  const noop = defineTool({
    name: "noop_effect",
    kind: "effect",
    input: z.object({ n: z.number() }),
    output: z.object({ n: z.number() }),
    run: (input) => input,
  });
  const runner = new InProcess({ store, tools: [noop] });
  let serial = 0;
  try {
    const rounds = await interleave(AGENT_SIDES, options.rounds, async (side, round): Promise<OpsFigures> => {
      const taskId = `bench-${options.responseBytes}-${round}-${serial++}`;
      const wrapped = onceTask({ taskId, store, tools: [] }).model(model);
      const call = async (m: typeof model) => m.doGenerate(PARAMS as never);
      switch (side) {
        case "model":
          return measureOps(ctx.probe, 1, options.roundMs, () => call(model));
        case "recorded turn":
          return measureOps(ctx.probe, 1, options.roundMs, () => call(wrapped as typeof model));
        case "replayed turn": {
          // Record the turns first (untimed; a replay is quicker than a recording, so record for longer), then
          // replay them through a resumed task of the same id.
          let recorded = 0;
          const until = performance.now() + 5 * options.roundMs;
          while (performance.now() < until) {
            await call(wrapped as typeof model);
            recorded++;
          }
          const resumed = onceTask({ taskId, store, tools: [] }).model(model) as typeof model;
          let replayed = 0;
          return measureOps(ctx.probe, 1, options.roundMs, async () => {
            if (replayed++ >= recorded)
              throw new Error("replayed every recorded turn before the round ended");
            return call(resumed);
          });
        }
        case "store claim+complete":
          return measureOps(ctx.probe, 1, options.roundMs, async (n) => {
            const key = deriveKey({ taskId, stepId: `s-${n}` });
            const claim = await store.claim({
              key,
              fingerprint: "f",
              tool: "t",
              phase: "effect",
              leaseMs: 30_000,
            });
            if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
            // The same result the in-process side stores: the difference is the flow, not the bytes.
            await store.complete(key, claim.token, JSON.stringify({ n }));
          });
        case "in-process effect":
          return measureOps(ctx.probe, 1, options.roundMs, (n) =>
            runner.call(noop, { n }, { taskId, stepId: `s-${n}` }),
          );
      }
    });
    const sides = Object.fromEntries(
      AGENT_SIDES.map((side) => [
        side,
        {
          callsPerSec: median(rounds[side].map((r) => r.opsPerSec)),
          nodeCpuUs: median(rounds[side].map((r) => r.nodeCpuUs)),
          redisCpuUs: median(rounds[side].map((r) => r.redisCpuUs)),
        },
      ]),
    ) as AgentTurnFigures["sides"];
    return { responseBytes: options.responseBytes, sides };
  } finally {
    redis.disconnect();
  }
}
