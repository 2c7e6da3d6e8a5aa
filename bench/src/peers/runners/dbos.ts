import { DBOS } from "@dbos-inc/dbos-sdk";
import { charge } from "../effect.js";
import { orderId, taskId } from "../protocol.js";
import { postgresBackendsCpu } from "./postgres-cpu.js";
import { type RunnerFactory, required } from "./runner.js";

/**
 * DBOS Transact on PostgreSQL, as its docs have it for side effects: each step a `DBOS.runStep`, each task a
 * workflow started with its task id as workflow id (DBOS's idempotency key: starting it again joins it), and the
 * step's `${workflowID}:${stepID}` sent downstream as `Idempotency-Key`. After a crash `DBOS.launch()` recovers
 * the workflows that were running and re-runs the step that had not recorded its output.
 */
export const dbosRunner: RunnerFactory = async (config, onStep) => {
  const postgres = required(config.postgres, "postgres");
  const task = DBOS.registerWorkflow(
    async (n: number, k: number) => {
      const id = taskId(config.runId, n);
      for (let i = 0; i < k; i++) {
        await DBOS.runStep(
          () =>
            charge(config.providerUrl, orderId(id, i), {
              idempotencyKey: `${DBOS.workflowID}:${DBOS.stepID}`,
            }),
          { name: "charge" },
        );
        onStep(n, i);
      }
      return k;
    },
    { name: "peers-task" },
  );
  DBOS.setConfig({
    name: "peers",
    systemDatabaseUrl: postgres.url,
    systemDatabasePoolSize: Math.max(10, config.concurrency + 10),
    logLevel: "warn",
  });
  await DBOS.launch();
  const backends = postgresBackendsCpu(postgres.url, postgres.database);
  return {
    async runTask(n, k) {
      const handle = await DBOS.startWorkflow(task, { workflowID: taskId(config.runId, n) })(n, k);
      await handle.getResult();
    },
    serverCpu: backends,
    async close() {
      await backends.close();
      await DBOS.shutdown();
    },
  };
};
