import { AgentTask } from "@once/agent";
import { defineTool } from "@once/core";
import { RedisStore } from "@once/redis";
import { Redis } from "ioredis";
import { z } from "zod";
const lookup = defineTool({ name: "lookup", kind: "read", input: z.object({ n: z.number().int() }), output: z.object({ square: z.number().int() }), run: ({ n }) => ({ square: n * n }) });
const redis = new Redis({ port: 6379 });
const store = await RedisStore.create({ redis, prefix: `prof${Date.now()}:`, checks: false });
const turns = 1000;
async function runLoop(task) {
  for (let turn = 0; turn <= turns; turn++) {
    const response = await task.turn({ provider: "bench", modelId: "counter", prompt: `step ${turn}` }, async () => ({ calls: turn === turns ? [] : [{ toolCallId: `call_${turn}`, toolName: "lookup", input: { n: turn } }] }), (r) => r.calls);
    for (const call of response.calls) await task.call(call.toolName, call.toolCallId, call.input);
  }
}
await runLoop(new AgentTask({ taskId: "t", store, tools: [lookup] }));
const read = [], full = [];
for (let i = 0; i < 15; i++) {
  let t = performance.now(); await store.readTask({ taskId: "t" }); read.push(performance.now() - t);
  t = performance.now(); await runLoop(new AgentTask({ taskId: "t", store, tools: [lookup] })); full.push(performance.now() - t);
}
const med = (a) => a.sort((x, y) => x - y)[a.length >> 1].toFixed(1);
console.log("readTask", med(read), "full resume", med(full));

{
  const fs = await import("node:fs");
  const r2 = new Redis({ port: 6379 });
  const lua = fs.readFileSync(new URL("../packages/redis/dist/lua/read-task-1.lua", import.meta.url), "utf8");
  const { deriveTaskKey } = await import("@once/core");
  const entry = store.prefix + "task:" + deriveTaskKey({ taskId: "t" });
  const sha = await r2.script("LOAD", lua);
  const ts = [];
  for (let i = 0; i < 15; i++) { const t = performance.now(); await r2.callBuffer("EVALSHA", sha, 1, entry, store.prefix); ts.push(performance.now() - t); }
  console.log("raw evalsha+decode", med(ts));
  await r2.quit();
}
await redis.quit();
