import http from "node:http";
import { createRequire } from "node:module";
import path from "node:path";
import { parseOrderId, taskId } from "../protocol.js";
import { type RunnerFactory, required } from "./runner.js";

/** The workflow's id as `workflow build` names it: its file, relative to the build's working directory, and name. */
export const WORKFLOW_ID = "workflow//./workflows/peers-task//peersTask";

type Handler = { POST(request: Request): Promise<Response> };

/**
 * Vercel's Workflow DevKit outside any web framework, as its framework-integration guide has it: the handler
 * bundles `workflow build` made (`flow.js`, `step.js`) served on a plain `node:http` server, the local world
 * (a directory of JSON files, an in-process queue that POSTs to this server) as the world, `start()` and a run's
 * `returnValue` from `workflow/api`. At start the world's `start()` re-enqueues the runs a crash left running.
 */
export const workflowRunner: RunnerFactory = async (config, onStep, emit) => {
  const settings = required(config.workflow, "workflow");
  process.env.WORKFLOW_LOCAL_DATA_DIR = settings.dataDir;
  process.env.PORT = String(settings.port);
  (globalThis as { __peersStepDone?: (task: string, step: number) => void }).__peersStepDone = (
    task,
    step,
  ) => {
    const parsed = parseOrderId(`${task}-s${step}`);
    if (parsed) onStep(parsed.task, parsed.step);
  };
  const load = createRequire(path.join(settings.buildDir, "package.json"));
  const flow = load("./.well-known/workflow/v1/flow.js") as Handler;
  const step = load("./.well-known/workflow/v1/step.js") as Handler;
  const server = http.createServer((req, res) => {
    serve(req, res, settings.port, flow, step).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(error));
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(settings.port, "127.0.0.1", resolve);
  });
  const { getRun, start } = await import("workflow/api");
  const { getWorld } = await import("workflow/runtime");
  await getWorld().start?.();
  const workflow = { workflowId: WORKFLOW_ID };
  return {
    async runTask(n, k) {
      if (n === config.fromTask && settings.resumeRunId) {
        await getRun(settings.resumeRunId).returnValue;
        return;
      }
      const run = await start(workflow as never, [config.providerUrl, taskId(config.runId, n), k]);
      if (config.mode === "run") emit({ type: "run-id", task: n, runId: run.runId });
      await run.returnValue;
    },
    async close() {
      await getWorld().close?.();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
};

/** One request to the workflow or step handler, from node:http to a fetch `Request` and back. */
async function serve(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  port: number,
  flow: Handler,
  step: Handler,
): Promise<void> {
  const url = req.url ?? "/";
  const handler = url.startsWith("/.well-known/workflow/v1/flow")
    ? flow
    : url.startsWith("/.well-known/workflow/v1/step")
      ? step
      : undefined;
  if (!handler || req.method !== "POST") {
    res.writeHead(404).end();
    return;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value === "string") headers.set(name, value);
    else if (Array.isArray(value)) for (const v of value) headers.append(name, v);
  }
  const response = await handler.POST(
    new Request(`http://localhost:${port}${url}`, { method: "POST", headers, body: Buffer.concat(chunks) }),
  );
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
}
