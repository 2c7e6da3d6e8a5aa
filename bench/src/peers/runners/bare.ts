import { charge } from "../effect.js";
import { orderId, taskId } from "../protocol.js";
import type { RunnerFactory } from "./runner.js";

/** The plain loop: the same POSTs, no engine. */
export const bareRunner: RunnerFactory = async (config, onStep) => ({
  async runTask(n, k) {
    const id = taskId(config.runId, n);
    for (let i = 0; i < k; i++) {
      await charge(config.providerUrl, orderId(id, i));
      onStep(n, i);
    }
  },
  async close() {},
});
