// LangGraph's own runtime, in an orchestrator process SIGKILLed at each point where a crash could make a resumed
// graph repeat itself, then resumed on the same thread: the shared scenarios of test/support/agent-crash.ts with
// test/agent-process.ts as the child, for each durability mode on a PostgresSaver (the graph resumes from what
// the saver kept) and on a MemorySaver (every checkpoint lost with the process: the graph starts over from the
// prompt) — then the kills in the tool node with the model step's checkpoint surely written, and surely not.

import path from "node:path";
import { fileURLToPath } from "node:url";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { PaymentsClient, type PaymentsServer, startPaymentsServer } from "@once/payments";
import { RedisStore } from "@once/redis";
import {
  cleanupPrefix,
  describeRun,
  postgresUrl,
  randomPrefix,
  randomSchema,
  redisUrl,
  runCommand,
} from "@once/support";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { AgentProcessConfig } from "../../../test/support/agent-child.js";
import { describeAgentCrashes } from "../../../test/support/agent-crash.js";
import type { GraphProcessConfig } from "./agent-process.js";

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** A world of its own per block: a store prefix, a provider, and (for a PostgresSaver) a checkpoint schema. */
function useCrashWorld(label: string, graph: Omit<GraphProcessConfig, "postgres"> & { postgres: boolean }) {
  const world = { prefix: randomPrefix(label), paymentsUrl: "", store: undefined as unknown as RedisStore };
  const schema = randomSchema(label);
  let redis: Redis;
  let payments: PaymentsServer;
  const settings: GraphProcessConfig = {
    graph: graph.graph,
    durability: graph.durability,
    ...(graph.postgres ? { postgres: { url: postgresUrl(), schema } } : {}),
    ...(graph.checkpoint ? { checkpoint: graph.checkpoint } : {}),
  };
  beforeAll(async () => {
    redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    world.store = await RedisStore.create({ redis, prefix: world.prefix });
    payments = await startPaymentsServer({ latency: { fixedMs: 5 } });
    world.paymentsUrl = payments.url;
    if (settings.postgres) {
      const saver = PostgresSaver.fromConnString(settings.postgres.url, { schema });
      await saver.setup();
      await saver.end();
    }
  });
  // Read by runCommand when a test starts its children: they inherit this process's environment.
  beforeEach(() => {
    process.env.ONCE_LANGGRAPH = JSON.stringify(settings);
  });
  afterAll(async () => {
    await payments.close();
    await cleanupPrefix(redis, world.prefix);
    redis.disconnect();
    if (settings.postgres) {
      const client = new pg.Client({ connectionString: postgresUrl() });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await client.end();
    }
  });
  return world;
}

for (const durability of ["sync", "async", "exit"] as const) {
  describe(`durability "${durability}", PostgresSaver`, () => {
    const world = useCrashWorld(`lg-${durability}`, { graph: "react", durability, postgres: true });
    describeAgentCrashes({
      orchestrator: `a LangGraph StateGraph with a ToolNode (durability "${durability}", PostgresSaver)`,
      packageRoot,
      world: () => world,
    });
  });
}

describe("createAgent, MemorySaver: every checkpoint is lost with the process", () => {
  const world = useCrashWorld("lg-memory", { graph: "agent", durability: "sync", postgres: false });
  describeAgentCrashes({
    orchestrator: "langchain's createAgent (MemorySaver)",
    packageRoot,
    world: () => world,
  });
});

/** Killed in the tool node right after the charge, with the model step's checkpoint as `checkpoint` says. */
async function killInToolNode(world: { prefix: string; paymentsUrl: string }, label: string) {
  const orderId = `order-${label}-${process.pid}`;
  const config: AgentProcessConfig = {
    redisUrl: redisUrl(),
    prefix: world.prefix,
    paymentsUrl: world.paymentsUrl,
    taskId: `task-${orderId}`,
    orderId,
    leaseMs: 1_000,
  };
  const child = (killAt?: "tool-call") =>
    runCommand(process.execPath, ["--import", "tsx", "test/agent-process.ts"], {
      cwd: packageRoot,
      env: {
        ...process.env,
        ONCE_AGENT_CONFIG: JSON.stringify({ ...config, ...(killAt ? { killAt } : {}) }),
      },
      timeoutMs: 60_000,
    });
  const crashed = await child("tool-call");
  expect(crashed.signal, describeRun(crashed)).toBe("SIGKILL");
  const resumed = await child();
  expect(resumed.code, describeRun(resumed)).toBe(0);
  const events = resumed.stdout
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as { event: string; turn?: number; answer?: string; messages?: number });
  const client = new PaymentsClient(world.paymentsUrl);
  return {
    /** How many messages the thread's checkpoint held when the resumed process started. */
    checkpointed: events.find((e) => e.event === "resuming")?.messages,
    asked: events.filter((e) => e.event === "model-call").map((e) => e.turn),
    answer: events.find((e) => e.event === "done")?.answer,
    charges: (await client.findCharges({ orderId })).length,
    emails: (await client.findEmails({ orderId })).length,
    orderId,
  };
}

describe('durability "async": killed in the tool node, the model step\'s checkpoint written or not', () => {
  describe("written: the graph resumes in the tool node, turn 1 replayed from the checkpoint", () => {
    const world = useCrashWorld("lg-written", {
      graph: "react",
      durability: "async",
      postgres: true,
      checkpoint: "written",
    });
    it("one charge, one email, turns 2 and 3 asked once, none before", async () => {
      const run = await killInToolNode(world, "written");
      // The prompt, turn 0, its result, and turn 1: the checkpoint of the model step that made the charge.
      expect(run).toMatchObject({ checkpointed: 4, asked: [2, 3], charges: 1, emails: 1 });
      expect(run.answer).toBe(`order ${run.orderId} is paid`);
    });
  });
  describe("held: lost, the graph resumes before turn 1, which is replayed from once's record", () => {
    const world = useCrashWorld("lg-held", {
      graph: "react",
      durability: "async",
      postgres: true,
      checkpoint: "held",
    });
    it("one charge, one email, turns 2 and 3 asked once, none before", async () => {
      const run = await killInToolNode(world, "held");
      // Turn 1's checkpoint was never written, so the graph resumes before it: with the prompt, turn 0 and its
      // result, or — when an async write of turn 0's tool result had not begun before the kill on a loaded
      // machine — without that result. Either way turn 1 comes from once's record, not from the model.
      expect([2, 3], `messages checkpointed: ${run.checkpointed}`).toContain(run.checkpointed);
      expect(run).toMatchObject({ asked: [2, 3], charges: 1, emails: 1 });
      expect(run.answer).toBe(`order ${run.orderId} is paid`);
    });
  });
});
