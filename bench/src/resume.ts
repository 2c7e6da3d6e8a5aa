import { AgentTask, type TurnToolCall } from "@once/agent";
import { defineTool, type OnceStore } from "@once/core";
import { wrapStore } from "@once/core/store-kit";
import type { Redis } from "ioredis";
import { z } from "zod";
import type { BenchContext } from "./bench-context.js";
import { median } from "./stats.js";

/**
 * What resuming an agent task costs by how many turns it recorded: every turn (one model call, one tool call
 * of it) replayed and one more asked. `one read` is the store as it is: the task's records loaded at once (one
 * script on one Redis server), its done steps replayed from them. `a claim per step` is the same store with its
 * task read hidden, so each step is claimed on its own — how every resume went before the task was read at
 * once, and how a task whose records predate filing still resumes.
 */
export interface ResumeFigures {
  turns: number;
  /** Median ms of a whole resume, and the commands it sent (each its own round trip unless pipelined). */
  sides: Record<ResumeSide, { ms: number; commands: number }>;
}

const RESUME_SIDES = ["a claim per step", "one read"] as const;
type ResumeSide = (typeof RESUME_SIDES)[number];

const lookup = defineTool({
  name: "lookup",
  kind: "read",
  input: z.object({ n: z.number().int() }),
  output: z.object({ square: z.number().int() }),
  run: ({ n }) => ({ square: n * n }),
});

interface Response {
  calls: TurnToolCall[];
}
const callsOf = (response: Response) => response.calls;

/** `turns` turns of one call each, then one turn with none: the model is asked only for turns not recorded. */
async function runLoop(task: AgentTask, turns: number): Promise<void> {
  for (let turn = 0; turn <= turns; turn++) {
    const response = await task.turn(
      { provider: "bench", modelId: "counter", prompt: `step ${turn}` },
      async () => ({
        calls: turn === turns ? [] : [{ toolCallId: `call_${turn}`, toolName: "lookup", input: { n: turn } }],
      }),
      callsOf,
    );
    for (const call of response.calls) await task.call(call.toolName, call.toolCallId, call.input);
  }
}

/** The store with its task read hidden: every step of a resume is claimed on its own. */
function claimPerStep(store: OnceStore): OnceStore {
  return wrapStore(store, { readTask: undefined });
}

/** Counts the commands a client sends. */
function counted(redis: Redis): () => number {
  let sent = 0;
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = ((...args: Parameters<Redis["sendCommand"]>) => {
    sent++;
    return send(...args);
  }) as Redis["sendCommand"];
  return () => sent;
}

export async function compareResume(
  ctx: BenchContext,
  options: { turns: readonly number[]; rounds: number },
): Promise<ResumeFigures[]> {
  const redis = ctx.target.connect();
  const sent = counted(redis);
  const { RedisStore } = ctx.builds[0] ?? { RedisStore: undefined };
  if (!RedisStore) throw new Error("no build to measure");
  const store = await RedisStore.create({ redis, prefix: `${ctx.prefix}resume:`, checks: false });
  const figures: ResumeFigures[] = [];
  try {
    for (const turns of options.turns) {
      const taskId = `resume-${turns}`;
      // Recorded once (untimed), each side then resumes the same task: the last turn, with no calls, stays
      // recorded after the first resume, so every resume replays the same steps.
      await runLoop(new AgentTask({ taskId, store, tools: [lookup] }), turns);
      const runs: Record<ResumeSide, { ms: number[]; commands: number[] }> = {
        "a claim per step": { ms: [], commands: [] },
        "one read": { ms: [], commands: [] },
      };
      for (let round = 0; round < options.rounds; round++) {
        for (const side of RESUME_SIDES) {
          const resumed = side === "one read" ? store : claimPerStep(store);
          const before = sent();
          const started = performance.now();
          await runLoop(new AgentTask({ taskId, store: resumed, tools: [lookup] }), turns);
          runs[side].ms.push(performance.now() - started);
          runs[side].commands.push(sent() - before);
        }
      }
      const sides = Object.fromEntries(
        RESUME_SIDES.map((side) => [
          side,
          { ms: Math.round(median(runs[side].ms) * 100) / 100, commands: median(runs[side].commands) },
        ]),
      ) as ResumeFigures["sides"];
      ctx.log(
        `resume of ${turns} turns: ${RESUME_SIDES.map((s) => `${s} ${sides[s].ms} ms, ${sides[s].commands} commands`).join("; ")}`,
      );
      figures.push({ turns, sides });
    }
    return figures;
  } finally {
    await redis.quit();
  }
}
