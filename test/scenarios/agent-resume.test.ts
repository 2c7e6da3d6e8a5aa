// A task resumed after 1,000 recorded turns loads what it recorded at once: on one Redis server one script
// (the task's entry and every filed record), on PostgreSQL one query. Its done turns and calls then replay from
// what was loaded, with no round trip each. Round trips are counted on the real clients: every command the
// ioredis client sends, every query the pg pool runs.

import { AgentTask, type TurnToolCall } from "@once/agent";
import { type ClaimRequest, defineTool, type OnceStore } from "@once/core";
import { wrapStore } from "@once/core/store-kit";
import { PostgresStore } from "@once/postgres";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, postgresUrl, randomPrefix, randomSchema, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";

const TURNS = 1_000;
const prefix = randomPrefix("resume");
const schema = randomSchema("resume");
let redis: Redis;
let pool: pg.Pool;
/** Commands the ioredis client sent, and queries the pg pool ran, since the start of the test. */
let commands = 0;
let queries = 0;

beforeAll(async () => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = ((...args: Parameters<Redis["sendCommand"]>) => {
    commands++;
    return send(...args);
  }) as Redis["sendCommand"];
  pool = new pg.Pool({ connectionString: postgresUrl(), max: 4 });
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    queries++;
    return query(...args);
  };
});

afterAll(async () => {
  await cleanupPrefix(redis, prefix);
  redis.disconnect();
  await pool.query(`drop schema if exists "${schema}" cascade`);
  await pool.end();
});

interface Response {
  calls: TurnToolCall[];
}
const callsOf = (response: Response) => response.calls;
const request = (turn: number) => ({ provider: "scripted", modelId: "counter", prompt: `step ${turn}` });

/** A task whose tool counts its runs: a read tool, recorded under its step like every call of a turn. */
function counting() {
  let runs = 0;
  const lookup = defineTool({
    name: "lookup",
    kind: "read",
    input: z.object({ n: z.number().int() }),
    output: z.object({ square: z.number().int() }),
    run: ({ n }) => {
      runs++;
      return { square: n * n };
    },
  });
  return { lookup, runs: () => runs };
}

/**
 * Runs the loop up to `turns` turns: each turn one call of `lookup`; the model is asked only for a turn that has
 * no record (counted in `asked`). Returns every call's result, in order.
 */
async function runLoop(task: AgentTask, turns: number, asked: { count: number }): Promise<unknown[]> {
  const results: unknown[] = [];
  for (let turn = 0; turn < turns; turn++) {
    const response = await task.turn(
      request(turn),
      async () => {
        asked.count++;
        return {
          calls: [{ toolCallId: `call_${turn}_${Math.random()}`, toolName: "lookup", input: { n: turn } }],
        };
      },
      callsOf,
    );
    for (const call of response.calls)
      results.push(await task.call(call.toolName, call.toolCallId, call.input));
  }
  return results;
}

/** The store as one from before claims were filed under their task: the same records, none filed. */
function unfiled(store: OnceStore): OnceStore {
  return wrapStore(store, {
    readTask: undefined,
    cancelTask: undefined,
    claim: ({ task: _task, ...request }: ClaimRequest) => store.claim(request as ClaimRequest),
  });
}

async function resumeOnce(
  store: OnceStore,
  count: () => number,
  label: string,
): Promise<{ recorded: number; resumed: number }> {
  const taskId = `resume-${label}-${process.pid}-${Date.now()}`;
  const first = counting();
  const asked = { count: 0 };
  const recordedBefore = count();
  const recordedResults = await runLoop(
    new AgentTask({ taskId, store, tools: [first.lookup] }),
    TURNS,
    asked,
  );
  const recorded = count() - recordedBefore;
  expect(asked.count).toBe(TURNS);
  expect(first.runs()).toBe(TURNS);

  // Resumed in a new AgentTask (a new process would do the same): the recorded turns and calls, then one more.
  const again = counting();
  const resumedAsked = { count: 0 };
  const before = count();
  const resumedResults = await runLoop(
    new AgentTask({ taskId, store, tools: [again.lookup] }),
    TURNS + 1,
    resumedAsked,
  );
  const resumed = count() - before;
  expect(resumedResults.slice(0, TURNS)).toEqual(recordedResults);
  expect(resumedAsked.count).toBe(1);
  expect(again.runs()).toBe(1);
  return { recorded, resumed };
}

/**
 * What a resume may send, however many turns it replays: one read of the task, then the new turn and its call
 * claimed and completed (4), and the process's liveness entry renewed before the new claim and by its heartbeat
 * meanwhile (one or two; a loaded machine can take long enough for the second).
 */
const RESUME_ROUND_TRIPS_MAX = 7;

describe("a resumed agent task loads what it recorded at once", () => {
  it(`Redis, one server: ${TURNS} recorded turns resume with one script for all of them`, async () => {
    const store = await RedisStore.create({ redis, prefix });
    const { recorded, resumed } = await resumeOnce(store, () => commands, "redis");
    console.log(
      `Redis: recording ${TURNS} turns sent ${recorded} commands; resuming them and asking one more sent ${resumed}`,
    );
    expect(resumed).toBeLessThanOrEqual(RESUME_ROUND_TRIPS_MAX);
    expect(recorded).toBeGreaterThan(TURNS * 2);
  }, 120_000);

  it(`PostgreSQL: ${TURNS} recorded turns resume with one query for all of them`, async () => {
    const store = await PostgresStore.create({ pool, schema });
    const { recorded, resumed } = await resumeOnce(store, () => queries, "postgres");
    console.log(
      `PostgreSQL: recording ${TURNS} turns ran ${recorded} queries; resuming them and asking one more ran ${resumed}`,
    );
    expect(resumed).toBeLessThanOrEqual(RESUME_ROUND_TRIPS_MAX);
    expect(recorded).toBeGreaterThan(TURNS * 2);
  }, 180_000);

  it("records written before claims were filed under their task resume as before: one claim per step, nothing run again", async () => {
    const store = unfiled(await RedisStore.create({ redis, prefix }));
    const taskId = `resume-unfiled-${process.pid}-${Date.now()}`;
    const first = counting();
    const asked = { count: 0 };
    const recorded = await runLoop(new AgentTask({ taskId, store, tools: [first.lookup] }), 20, asked);
    // The new build, on the same records: nothing of the task is filed, so each step is claimed as before.
    const real = await RedisStore.create({ redis, prefix });
    expect((await real.readTask({ taskId })).records).toEqual([]);
    const again = counting();
    const resumedAsked = { count: 0 };
    const before = commands;
    const resumed = await runLoop(
      new AgentTask({ taskId, store: real, tools: [again.lookup] }),
      20,
      resumedAsked,
    );
    expect(resumed).toEqual(recorded);
    expect(resumedAsked.count).toBe(0);
    expect(again.runs()).toBe(0);
    // One read of the (empty) task, then a claim per turn and per call.
    expect(commands - before).toBeGreaterThanOrEqual(40);
  }, 60_000);
});
