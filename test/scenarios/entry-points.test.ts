// The record must outlive every retry of its call, whichever entry point the call came through. A retention
// shorter than the retry window lets a record expire between a crash after the charge and the retry: the claim
// is granted as new and the effect runs again, without a reconcile. The check lives in the one place every
// entry point passes through (the engine each constructs), so every public entry point refuses such a store
// at start, naming every term — listed here one by one, on Redis and on PostgreSQL — and the last test
// proves there is no other way into the flow.
//
// The same list answers a call of a cancelled task (docs/cancellation.md): every entry point names the task in
// its claims, and each tells its caller TaskCancelledError (a job fails with it, an MCP call answers an error
// result with its code) while nothing of the tool runs and no model is asked.

import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { HumanMessage } from "@langchain/core/messages";
import { FakeListChatModel } from "@langchain/core/utils/testing";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { Agent as MastraAgent } from "@mastra/core/agent";
import { MastraLanguageModelV2Mock } from "@mastra/core/test-utils/llm-mock";
import { createWorkflow } from "@mastra/core/workflows";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { AgentTask } from "@once/agent";
import { onceTask as aiTask } from "@once/ai";
import {
  type CallData,
  createCallProcessor,
  Dispatcher,
  jobIdForKey,
  OnceWorker,
  withOnce,
} from "@once/bullmq";
import {
  type AnyTool,
  type CancelRequest,
  defineTool,
  deriveKey,
  MemoryStore,
  OnceError,
  type OnceStore,
  type TaskStore,
} from "@once/core";
import { InProcess, RetryWindowError } from "@once/engine";
import { onceGraph } from "@once/langgraph";
import { onceRun, onceStep } from "@once/mastra";
import { onceMcpServer } from "@once/mcp";
import { onceTask as openAiTask } from "@once/openai-agents";
import { PostgresStore } from "@once/postgres";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, pollUntil, postgresUrl, randomPrefix, randomSchema, redisUrl } from "@once/support";
import { Agent, type Model, type ModelResponse, run, Usage } from "@openai/agents";
import { assistantMessage } from "@openai/agents/testing";
import { generateText } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { Job, Queue } from "bullmq";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chargeInput, chargeOutput } from "../fixtures/tools.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The configuration: a record kept 1 s, an effect whose owner holds it 6 s. */
const RETENTION_MS = 1_000;
const charge = defineTool({
  name: "charge_customer",
  kind: "effect",
  input: chargeInput,
  output: chargeOutput,
  leaseMs: 6_000,
  run: () => {
    throw new Error("never runs: the configuration is refused");
  },
});

let redis: Redis;
let queue: Queue;
let pool: pg.Pool;
const prefix = randomPrefix("entry-points");
const schema = randomSchema("entry_points");

/** Every public entry point of once that takes calls, each made as a user makes it. */
const ENTRY_POINTS: Record<string, (store: OnceStore, tools: readonly AnyTool[]) => unknown> = {
  "OnceWorker.create": (store, tools) =>
    OnceWorker.create({ queueName: queue.name, connection: redis, store, tools, workerOptions: { prefix } }),
  createCallProcessor: (store, tools) => createCallProcessor({ store, tools }),
  withOnce: (store, tools) => withOnce(async () => "not a once job", { store, tools }),
  "Dispatcher.create": (store, tools) => Dispatcher.create({ queue, store, tools }),
  "new InProcess": (store, tools) => new InProcess({ store, tools }),
  "new AgentTask": (store, tools) => new AgentTask({ taskId: "task-window", store, tools }),
  "@once/ai onceTask": (store, tools) => aiTask({ taskId: "task-window", store, tools }),
  "@once/openai-agents onceTask": (store, tools) => openAiTask({ taskId: "task-window", store, tools }),
  "@once/mcp onceMcpServer": (store, tools) =>
    onceMcpServer({ name: "orders", version: "1.0.0", store, tools }),
  "@once/langgraph onceGraph": (store, tools) => onceGraph({ store, tools }),
  "@once/mastra onceRun": (store, tools) => onceRun({ runId: "task-window", store, tools }),
  "@once/mastra onceStep": (store, tools) => onceStep(tools[0] as AnyTool, { store }),
};

const STORES: Record<string, (retentionMs: number) => Promise<OnceStore>> = {
  RedisStore: (retentionMs) => RedisStore.create({ redis, prefix, retentionMs }),
  PostgresStore: (retentionMs) => PostgresStore.create({ pool, schema, retentionMs }),
};

beforeAll(async () => {
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  queue = new Queue(`entry-points-${process.pid}`, { connection: redis, prefix });
  pool = new pg.Pool({ connectionString: postgresUrl(), max: 4 });
});

afterAll(async () => {
  await queue.close();
  await cleanupPrefix(redis, prefix);
  redis.disconnect();
  await pool.query(`drop schema if exists "${schema}" cascade`);
  await pool.end();
});

describe.each(Object.keys(STORES))("a %s whose retention is shorter than the retry window", (storeName) => {
  it.each(Object.keys(ENTRY_POINTS))("%s refuses to start, naming every term", async (entryPoint) => {
    const store = await (STORES[storeName] as (typeof STORES)[string])(RETENTION_MS);
    const made = ENTRY_POINTS[entryPoint] as (typeof ENTRY_POINTS)[string];
    const refusal = await (async () => made(store, [charge]))().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(RetryWindowError);
    const { message, terms, worstCaseMs } = refusal as RetryWindowError;
    expect(message).toContain(`retention ${RETENTION_MS} ms is shorter than the worst-case retry window`);
    expect(worstCaseMs).toBeGreaterThanOrEqual(6_000);
    for (const term of terms) expect(message).toContain(`${term.name}: ${term.ms} ms (${term.detail})`);
    expect(terms.map((t) => t.name)).toEqual(expect.arrayContaining(["attempts", "resumeGap"]));
    // The lease the window counts, and whose it is (the charge's own 6 s, or an agent's model turn's).
    expect(message).toMatch(/lease \d+ \((charge_customer|model_turn)'s own|the \w+'s\)/);
  });

  it("every entry point counts the resume gap it is given", async () => {
    const plenty = await (STORES[storeName] as (typeof STORES)[string])(60_000);
    expect(new InProcess({ store: plenty, tools: [charge] }).retryWindow.worstCaseMs).toBeLessThan(60_000);
    expect(() => new InProcess({ store: plenty, tools: [charge], resumeGapMs: 60_000 })).toThrow(
      /resumeGap: 60000 ms/,
    );
    expect(() => new AgentTask({ taskId: "t", store: plenty, tools: [charge], resumeGapMs: 60_000 })).toThrow(
      RetryWindowError,
    );
  });
});

/** Source files of the published packages, with their text. */
function packageSources(): { file: string; text: string }[] {
  const found: { file: string; text: string }[] = [];
  const visit = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) visit(full);
      else if (entry.name.endsWith(".ts"))
        found.push({ file: path.relative(repoRoot, full), text: readFileSync(full, "utf8") });
    }
  };
  for (const pkg of readdirSync(path.join(repoRoot, "packages"))) {
    const src = path.join(repoRoot, "packages", pkg, "src");
    try {
      visit(src);
    } catch {
      // a package without sources of its own
    }
  }
  return found;
}

describe("the way into the flow", () => {
  it("is the engine alone: the flow is made in one place, and every entry point above makes an engine", () => {
    const sources = packageSources();
    const making = (pattern: RegExp) => sources.filter((s) => pattern.test(s.text)).map((s) => s.file);
    // Only the engine builds the flow, after its checks.
    expect(making(/new CallFlow\(/)).toEqual(["packages/engine/src/engine.ts"]);
    // The engine is built by the BullMQ entry points and InProcess; everything else builds an InProcess.
    expect(making(/new Engine\(/).sort()).toEqual([
      "packages/bullmq/src/call-processor.ts",
      "packages/bullmq/src/dispatcher.ts",
      "packages/engine/src/in-process.ts",
    ]);
    expect(making(/new InProcess\(/).sort()).toEqual([
      "packages/agent/src/agent-task.ts",
      "packages/mcp/src/server.ts",
    ]);
  });
});

/** What ran of the cancelled task's tools and models: every count must stay 0. */
const ran = { tool: 0, model: 0 };
const BY: CancelRequest = { by: "ops@example.com", why: "the order was withdrawn" };
const cancellable = defineTool({
  name: "charge_customer",
  kind: "effect",
  input: chargeInput,
  output: chargeOutput,
  prepare: () => {
    ran.tool += 1;
  },
  run: (input) => {
    ran.tool += 1;
    return { chargeId: "ch_never", orderId: input.orderId, amount: input.amount };
  },
});
const chargeArgs = { orderId: "order-cancelled", amount: 1_200 };

/** What a caller is told: once's error code and message (for a job, its error's cause; for MCP, the result). */
interface Told {
  code: string | undefined;
  message: string;
}

function toldBy(error: unknown): Told {
  const cause = (error as { cause?: unknown } | undefined)?.cause;
  const once = OnceError.is(error) ? error : OnceError.is(cause) ? cause : undefined;
  return { code: once?.code, message: once?.message ?? String(error) };
}

/** A fresh queue on the test's Redis, obliterated by `settle`. */
function freshQueue(label: string): Queue {
  return new Queue(`${label}-${randomUUID().slice(0, 8)}`, { connection: redis, prefix });
}

/** A job of the cancelled task's charge as a dispatcher enqueues it, read back as BullMQ hands it to a processor. */
async function chargeJob(target: Queue, taskId: string): Promise<Job> {
  const data: CallData = {
    v: 2,
    tool: cancellable.name,
    kind: "effect",
    callId: randomUUID(),
    namespace: "default",
    taskId,
    stepId: "charge",
    input: chargeArgs,
  };
  const jobId = jobIdForKey(deriveKey({ taskId, stepId: "charge" }));
  await target.add(cancellable.name, data, { jobId, attempts: 3 });
  return (await Job.fromId(target, jobId)) as Job;
}

/** A model that answers "done" and counts its calls: a cancelled task must never call it. */
function countingAiModel() {
  return new MockLanguageModelV4({
    doGenerate: async () => {
      ran.model += 1;
      return {
        content: [{ type: "text", text: "done" }],
        finishReason: { unified: "stop", raw: "stop" },
        usage: { inputTokens: { total: 1 }, outputTokens: { total: 1 } },
        warnings: [],
      } as never;
    },
  });
}

class CountingAgentsModel implements Model {
  async getResponse(): Promise<ModelResponse> {
    ran.model += 1;
    return { output: [assistantMessage("done")], usage: new Usage(), responseId: "resp_counting" };
  }
  // biome-ignore lint/correctness/useYield: a cancelled task's run never streams.
  async *getStreamedResponse(): AsyncIterable<never> {
    ran.model += 1;
    throw new Error("not streamed");
  }
}

/** LangChain's own fake chat model, counting its calls: a cancelled thread must never call it. */
class CountingChatModel extends FakeListChatModel {
  constructor() {
    super({ responses: ["done"] });
  }
  override _generate(...args: Parameters<FakeListChatModel["_generate"]>) {
    ran.model += 1;
    return super._generate(...args);
  }
}

/** Mastra's own mock model, answering "done" and counting its calls. */
function countingMastraModel() {
  const answer = async () => {
    ran.model += 1;
    return {
      content: [{ type: "text" as const, text: "done" }],
      finishReason: "stop" as const,
      usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 },
      warnings: [],
    };
  };
  return new MastraLanguageModelV2Mock({
    provider: "mock",
    modelId: "counting",
    doGenerate: answer,
    doStream: async () => {
      await answer();
      throw new Error("not streamed");
    },
  });
}

/** What a failed Mastra workflow run was told: its step's error, as an Error or as its serialized fields. */
function toldByRun(result: { status: string; error?: unknown }): Told {
  if (result.status !== "failed") return { code: undefined, message: `the run ended ${result.status}` };
  const error = result.error;
  if (error instanceof Error) return toldBy(error);
  const fields = error as { code?: string; message?: string };
  return { code: fields.code, message: fields.message ?? JSON.stringify(error) };
}

/**
 * One call of the charge as a user makes it through each entry point, for a task that is already cancelled;
 * resolves with what the caller was told. `settle` closes what the call opened.
 */
const CANCELLED_CALLS: Record<
  string,
  (store: TaskStore, taskId: string, settle: (close: () => Promise<unknown>) => void) => Promise<Told>
> = {
  "OnceWorker.create": async (store, taskId, settle) => {
    const target = freshQueue("cancel-worker");
    const failures: Told[] = [];
    const worker = await OnceWorker.create({
      queueName: target.name,
      connection: redis,
      store,
      tools: [cancellable],
      jobRetry: { attempts: 3 },
      workerOptions: { prefix },
    });
    worker.worker.on("failed", (_job, error) => failures.push(toldBy(error)));
    settle(async () => {
      await worker.close(true);
      await target.obliterate({ force: true });
      await target.close();
    });
    const job = await chargeJob(target, taskId);
    expect(await pollUntil(async () => (await job.getState()) === "failed", { timeoutMs: 10_000 })).toBe(
      true,
    );
    // Unrecoverable: the first of its three attempts was its last.
    expect((await Job.fromId(target, job.id as string))?.attemptsMade).toBe(1);
    return failures[0] ?? { code: undefined, message: "no failure seen" };
  },
  createCallProcessor: async (store, taskId, settle) => {
    const target = freshQueue("cancel-processor");
    settle(async () => {
      await target.obliterate({ force: true });
      await target.close();
    });
    const processCall = createCallProcessor({ store, tools: [cancellable] });
    return processCall(await chargeJob(target, taskId)).then(
      () => ({ code: undefined, message: "completed" }),
      toldBy,
    );
  },
  withOnce: async (store, taskId, settle) => {
    const target = freshQueue("cancel-with-once");
    settle(async () => {
      await target.obliterate({ force: true });
      await target.close();
    });
    const processJob = withOnce(async () => "not a once job", { store, tools: [cancellable] });
    return Promise.resolve(processJob(await chargeJob(target, taskId))).then(
      () => ({ code: undefined, message: "completed" }),
      toldBy,
    );
  },
  "Dispatcher.create": async (store, taskId, settle) => {
    const target = freshQueue("cancel-dispatcher");
    const worker = await OnceWorker.create({
      queueName: target.name,
      connection: redis,
      store,
      tools: [cancellable],
      workerOptions: { prefix },
    });
    const dispatcher = await Dispatcher.create({ queue: target, store, tools: [cancellable], retries: 0 });
    settle(async () => {
      await dispatcher.close();
      await worker.close(true);
      await target.obliterate({ force: true });
      await target.close();
    });
    return dispatcher
      .call(cancellable, chargeArgs, { taskId, stepId: "charge" })
      .then(() => ({ code: undefined, message: "completed" }), toldBy);
  },
  "new InProcess": (store, taskId) =>
    new InProcess({ store, tools: [cancellable] })
      .call(cancellable, chargeArgs, { taskId, stepId: "charge" })
      .then(() => ({ code: undefined, message: "completed" }), toldBy),
  "new AgentTask": (store, taskId) =>
    new AgentTask({ taskId, store, tools: [cancellable] })
      .turn(
        { provider: "counting", modelId: "counting" },
        async () => {
          ran.model += 1;
          return {};
        },
        () => [],
      )
      .then(() => ({ code: undefined, message: "completed" }), toldBy),
  "@once/ai onceTask": (store, taskId) => {
    const task = aiTask({ taskId, store, tools: [cancellable] });
    return generateText({
      model: task.model(countingAiModel()),
      tools: task.tools,
      prompt: "charge it",
    }).then(() => ({ code: undefined, message: "completed" }), toldBy);
  },
  "@once/openai-agents onceTask": (store, taskId) => {
    const task = openAiTask({ taskId, store, tools: [cancellable] });
    const agent = new Agent({
      name: "charger",
      instructions: "charge it",
      model: task.model(new CountingAgentsModel(), "counting"),
      tools: task.tools,
    });
    return run(agent, "charge it").then(() => ({ code: undefined, message: "completed" }), toldBy);
  },
  "@once/mcp onceMcpServer": async (store, taskId, settle) => {
    const server = onceMcpServer({ name: "orders", version: "1.0.0", store, tools: [cancellable] });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: "cancelled-caller", version: "1.0.0" });
    await client.connect(clientSide);
    settle(() => client.close());
    const result = (await client.callTool({
      name: cancellable.name,
      arguments: chargeArgs,
      _meta: { "once/step": { taskId, stepId: "charge" } },
    })) as CallToolResult;
    expect(result.isError).toBe(true);
    const [text] = result.content;
    return {
      code: result._meta?.["once/error"] as string | undefined,
      message: text?.type === "text" ? text.text : "",
    };
  },
  "@once/langgraph onceGraph": (store, taskId) => {
    const once = onceGraph({ store, tools: [cancellable] });
    const model = once.model(new CountingChatModel(), "counting");
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("agent", async (state) => ({ messages: [await model.invoke(state.messages)] }))
      .addEdge(START, "agent")
      .addEdge("agent", END)
      .compile();
    return graph
      .invoke({ messages: [new HumanMessage("charge it")] }, { configurable: { thread_id: taskId } })
      .then(() => ({ code: undefined, message: "completed" }), toldBy);
  },
  "@once/mastra onceRun": (store, taskId) => {
    const task = onceRun({ runId: taskId, store, tools: [cancellable] });
    const agent = new MastraAgent({
      id: "charger",
      name: "charger",
      instructions: "charge it",
      model: task.model(countingMastraModel()) as never,
      tools: task.tools,
    });
    return agent
      .generate("charge it", { runId: task.runId })
      .then(() => ({ code: undefined, message: "completed" }), toldBy);
  },
  "@once/mastra onceStep": async (store, taskId) => {
    const workflow = createWorkflow({
      id: "charge-order",
      inputSchema: cancellable.input,
      outputSchema: cancellable.output,
    })
      .then(onceStep(cancellable, { store, id: "charge" }))
      .commit();
    const started = await workflow.createRun({ runId: taskId });
    return toldByRun(await started.start({ inputData: chargeArgs }));
  },
};

const TASK_STORES: Record<string, () => Promise<TaskStore>> = {
  MemoryStore: async () => new MemoryStore(),
  RedisStore: () => RedisStore.create({ redis, prefix }),
  PostgresStore: () => PostgresStore.create({ pool, schema }),
};

describe("a call of a cancelled task", () => {
  it("is listed for every entry point above", () => {
    expect(Object.keys(CANCELLED_CALLS).sort()).toEqual(Object.keys(ENTRY_POINTS).sort());
  });

  describe.each(Object.keys(TASK_STORES))("on a %s", (storeName) => {
    it.each(Object.keys(CANCELLED_CALLS))(
      "through %s is answered TaskCancelledError, and nothing of the tool runs",
      async (entryPoint) => {
        const store = await (TASK_STORES[storeName] as (typeof TASK_STORES)[string])();
        const taskId = `task-cancelled-${randomUUID().slice(0, 8)}`;
        await store.cancelTask({ taskId }, BY);
        ran.tool = 0;
        ran.model = 0;
        const closers: (() => Promise<unknown>)[] = [];
        try {
          const call = CANCELLED_CALLS[entryPoint] as (typeof CANCELLED_CALLS)[string];
          const told = await call(store, taskId, (close) => closers.push(close));
          expect(told.code).toBe("ONCE_TASK_CANCELLED");
          expect(told.message).toContain(`task "${taskId}" was cancelled by ${BY.by}`);
          expect(told.message).toContain(BY.why);
          expect(ran).toEqual({ tool: 0, model: 0 });
        } finally {
          for (const close of closers.reverse()) await close();
        }
      },
    );
  });
});
