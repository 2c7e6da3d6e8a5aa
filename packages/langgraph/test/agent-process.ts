// The order agent's graph in a process of its own, for the crash scenarios: `node --import tsx agent-process.ts`
// with the shared settings as JSON in ONCE_AGENT_CONFIG (test/support/agent-child.ts) and LangGraph's in
// ONCE_LANGGRAPH (the graph, the checkpointer, the durability mode, and where the kill stands to the checkpoint).
// It runs the graph through onceGraph on the thread `taskId` — resuming it from its checkpoint when the thread
// has one, else from the prompt — prints one JSON line per event, and SIGKILLs itself at the point it was told
// to: a real crash, mid-flight, with nothing cleaned up.

import type { BaseMessage } from "@langchain/core/messages";
import { type BaseCheckpointSaver, MemorySaver } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { hookedOrderAgentTools, modelLatencyMs, pendingOrder, RedisOrderBook } from "@once/order-agent";
import { RedisStore } from "@once/redis";
import { Redis } from "ioredis";
import { agentChild } from "../../../test/support/agent-child.js";
import { onceGraph } from "../src/index.js";
import { agentGraph, input, reactGraph } from "./graphs.js";
import { OrderAgentChatModel } from "./order-agent-model.js";

/** LangGraph's side of the child's settings. */
export interface GraphProcessConfig {
  graph: "react" | "agent";
  durability: "sync" | "async" | "exit";
  /** A PostgresSaver on this URL and schema (set up by the test), or a MemorySaver that dies with the process. */
  postgres?: { url: string; schema: string };
  /**
   * Where a kill in the tool node stands to the checkpoint of the model step before it: `written` waits for
   * every write to the saver begun so far; `held` keeps every write after turn 1's answer (checkpoints and the
   * model task's own writes) from the saver — with `async` durability the graph goes on without them. Unset: as
   * the durability mode has it.
   */
  checkpoint?: "written" | "held";
}

const { config, emit, die } = agentChild();
const settings = JSON.parse(process.env.ONCE_LANGGRAPH ?? "null") as GraphProcessConfig;

const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
const store = await RedisStore.create({ redis, prefix: config.prefix });
// The order book in Redis, as a deployment's would be: the resumed process sees the status the crashed one set.
const orders = new RedisOrderBook({ redis, prefix: `${config.prefix}order:` });
await orders.create(pendingOrder(config.orderId));

const checkpointer: BaseCheckpointSaver = settings.postgres
  ? PostgresSaver.fromConnString(settings.postgres.url, { schema: settings.postgres.schema })
  : new MemorySaver();
// Every write to the saver — a step's checkpoint (`put`) and a finished task's writes kept for it (`putWrites`)
// — is tracked, so a kill can wait for them all, or hold them back.
const writes = new Set<Promise<unknown>>();
let holding = false;
function tracked<Args extends unknown[], Result>(write: (...args: Args) => Promise<Result>) {
  return (...args: Args): Promise<Result> => {
    if (holding) return new Promise<Result>(() => {});
    const written = write(...args);
    writes.add(written);
    void written.finally(() => writes.delete(written));
    return written;
  };
}
checkpointer.put = tracked(checkpointer.put.bind(checkpointer));
checkpointer.putWrites = tracked(checkpointer.putWrites.bind(checkpointer));

/** Resolves once the thread's saved checkpoint ends with the model's call of charge_customer (10 s at most). */
async function chargeCheckpointed(): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    await Promise.all([...writes]);
    const saved = await checkpointer.getTuple({ configurable: { thread_id: config.taskId } });
    const messages =
      (saved?.checkpoint.channel_values as { messages?: unknown[] } | undefined)?.messages ?? [];
    const last = messages.at(-1) as { tool_calls?: { name: string }[] } | undefined;
    if (last?.tool_calls?.some((call) => call.name === "charge_customer")) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error("the model step's checkpoint was not written within 10 s");
}

let chargeStored: () => void = () => {};
const charged = new Promise<void>((resolve) => {
  chargeStored = resolve;
});
const tools = hookedOrderAgentTools(config.paymentsUrl, orders, {
  afterCharge: async () => {
    emit("charged");
    if (config.killAt !== "tool-call") return;
    // `written`: the saver holds the checkpoint of the model step that made this charge (with `async` durability
    // the graph may begin that write after the tool node starts: waiting only for writes begun so far lost the
    // race on a loaded machine). `held`: the writes begun before turn 1's answer land (the later ones never
    // start), so what the kill leaves is the same however slow the saver.
    if (settings.checkpoint === "written") await chargeCheckpointed();
    if (settings.checkpoint === "held") await Promise.all([...writes]);
    return die("tool-call");
  },
  beforeEmail: async () => {
    if (config.killAt !== "between-tool-calls") return;
    await charged; // the charge is stored: the turn's first call is over, its second not begun
    return die("between-tool-calls");
  },
});
const model = new OrderAgentChatModel(config.orderId, {
  latencyMs: modelLatencyMs,
  answering: (turn) => {
    emit("model-call", { turn });
    if (config.killAt === "model-call" && turn === 1) return die("model-call");
    if (settings.checkpoint === "held" && turn === 1) holding = true;
  },
});
const once = onceGraph({ store, tools: tools.all, leaseMs: config.leaseMs, turnLeaseMs: config.leaseMs });
const charge = once.tools.find((t) => t.name === "charge_customer");
if (charge) {
  const invoke = charge.invoke.bind(charge);
  charge.invoke = async (...args) => {
    const result = await invoke(...args);
    chargeStored();
    return result;
  };
}
const build = settings.graph === "agent" ? agentGraph : reactGraph;
const graph = build(once.model(model, "order-agent"), once.tools, checkpointer);
const thread = { configurable: { thread_id: config.taskId }, durability: settings.durability };
// A thread with a checkpoint resumes from it; one without (never written, or lost with a MemorySaver) starts
// from the prompt, and its recorded turns replay from once's store.
const saved = await graph.getState(thread);
const held = ((saved.values as { messages?: unknown[] }).messages ?? []).length;
emit("resuming", { messages: held });
const started = held > 0;
const result = await graph.invoke(started ? null : input(), thread);
if (config.killAt === "after-last-turn") await die("after-last-turn");
const messages = (result as { messages: BaseMessage[] }).messages;
const answers = messages.filter((m) => m.getType() === "ai");
emit("done", {
  answer: answers.at(-1)?.content,
  steps: answers.map((m) =>
    ((m as { tool_calls?: { name: string; args: unknown }[] }).tool_calls ?? []).map((call) => ({
      tool: call.name,
      input: call.args,
    })),
  ),
});
redis.disconnect();
if (checkpointer instanceof PostgresSaver) await checkpointer.end();
