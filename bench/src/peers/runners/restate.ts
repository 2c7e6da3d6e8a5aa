import * as restate from "@restatedev/restate-sdk";
import { charge } from "../effect.js";
import { processCpuSeconds } from "../proc-cpu.js";
import { orderId, taskId } from "../protocol.js";
import { invokeTask, RESTATE_SERVICE, registerDeployment } from "./restate-client.js";
import { counterMeter, type RunnerFactory, required } from "./runner.js";

/**
 * Restate, as its docs have it for side effects: each step a `ctx.run` (journaled; re-run when the endpoint died
 * before its result was journaled), an idempotency key made with `ctx.rand.uuidv4()` (seeded by the invocation
 * id, so the same on every retry) sent downstream as `Idempotency-Key`, and each task one invocation with the
 * task id as its `idempotency-key` header. The endpoint is this child, an HTTP/2 server restate-server calls;
 * in `cost` and `run` mode the child also calls the ingress for its tasks.
 */
export const restateRunner: RunnerFactory = async (config, onStep) => {
  const settings = required(config.restate, "restate");
  const service = restate.service({
    name: RESTATE_SERVICE,
    handlers: {
      task: async (ctx: restate.Context, request: { n: number; k: number }) => {
        const id = taskId(config.runId, request.n);
        for (let i = 0; i < request.k; i++) {
          const key = ctx.rand.uuidv4();
          await ctx.run("charge", () => charge(config.providerUrl, orderId(id, i), { idempotencyKey: key }));
          onStep(request.n, i);
        }
        return request.k;
      },
    },
  });
  const port = await restate.serve({ services: [service], port: settings.endpointPort });
  if (settings.register) await registerDeployment(settings.adminUrl, `http://127.0.0.1:${port}`);
  return {
    runTask: (n, k) => invokeTask(settings.ingressUrl, config.runId, n, k),
    serverCpu: counterMeter(() => processCpuSeconds(settings.serverPid) ?? Number.NaN),
    // The HTTP/2 server has no handle here; the child exits after closing.
    async close() {},
  };
};
