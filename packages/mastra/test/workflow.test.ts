// Mastra's own workflow runner on a PostgresStore, with the charge and the receipt as once steps: a run
// suspended for approval and resumed by two processes at once, and a resumed run SIGKILLed in a step after the
// provider acted, then restarted by another process — each step's effect happens once.

import path from "node:path";
import { fileURLToPath } from "node:url";
import { PostgresStore } from "@mastra/pg";
import { PaymentsClient } from "@once/payments";
import { describeRun, postgresUrl, randomSchema, redisUrl, runCommand } from "@once/support";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { payments, prefix, useAgentWorld } from "./agent-world.js";
import type { WorkflowProcessConfig } from "./workflow-process.js";

useAgentWorld("mastra-workflow");
const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const schema = randomSchema("mastra");

beforeAll(async () => {
  // Mastra creates its tables on first use; once here, so two processes starting together do not race for it.
  const storage = new PostgresStore({ id: "once-test", connectionString: postgresUrl(), schemaName: schema });
  await storage.init();
  await storage.close();
});
afterAll(async () => {
  const client = new pg.Client({ connectionString: postgresUrl() });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
});

let serial = 0;
function runOf(label: string) {
  const orderId = `order-${label}-${process.pid}-${++serial}`;
  const base = {
    redisUrl: redisUrl(),
    prefix,
    paymentsUrl: payments.url,
    postgres: { url: postgresUrl(), schema },
    runId: `run-${orderId}`,
    orderId,
    leaseMs: 1_000,
  };
  const child = async (
    action: WorkflowProcessConfig["action"],
    options: { killIn?: WorkflowProcessConfig["killIn"]; together?: number } = {},
  ) => {
    const config: WorkflowProcessConfig = { ...base, action, ...options };
    const run = await runCommand(process.execPath, ["--import", "tsx", "test/workflow-process.ts"], {
      cwd: packageRoot,
      env: { ...process.env, ONCE_MASTRA_WORKFLOW: JSON.stringify(config) },
      timeoutMs: 60_000,
    });
    const events = run.stdout
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as { event: string; status?: string; step?: string; error?: string });
    return {
      run,
      done: events.find((e) => e.event === "done"),
      refused: events.find((e) => e.event === "refused"),
      killed: events.find((e) => e.event === "killed"),
      /** This process ran the charge step (through once) and went on to the email. */
      pastCharge: events.some((e) => e.event === "past-charge"),
    };
  };
  const ledger = async () => {
    const client = new PaymentsClient(payments.url);
    return {
      charges: (await client.findCharges({ orderId })).length,
      emails: (await client.findEmails({ orderId })).length,
    };
  };
  return { child, ledger };
}

describe("a Mastra workflow's once steps, run by Mastra's own runner on a PostgresStore", () => {
  it("suspended for approval, then resumed by two processes at once: one charge, one email", async () => {
    const { child, ledger } = runOf("two");
    const started = await child("start");
    expect(started.done?.status, describeRun(started.run)).toBe("suspended");
    expect(await ledger()).toEqual({ charges: 0, emails: 0 });

    const both = await Promise.all([child("resume", { together: 2 }), child("resume", { together: 2 })]);
    const said = both.map((b) => describeRun(b.run)).join("\n");
    for (const { run } of both) expect(run.code, said).toBe(0);
    // Mastra claims a suspension for one resume (WORKFLOW_RESUME_ALREADY_CLAIMED), or finds the run no longer
    // suspended; either way the steps' effects happen once.
    expect(both.filter((b) => b.done?.status === "success").length, said).toBeGreaterThanOrEqual(1);
    for (const { refused } of both.filter((b) => b.done === undefined))
      expect(refused?.error, said).toMatch(/already resumed by another caller|not suspended/);
    expect(await ledger()).toEqual({ charges: 1, emails: 1 });
  });

  it("resumed, SIGKILLed in the charge step, then restarted by two processes at once: both run the steps, each effect once", async () => {
    const { child, ledger } = runOf("two-restarts");
    expect((await child("start")).done?.status).toBe("suspended");
    const crashed = await child("resume", { killIn: "charge" });
    expect(crashed.run.signal, describeRun(crashed.run)).toBe("SIGKILL");

    const both = await Promise.all([child("restart", { together: 2 }), child("restart", { together: 2 })]);
    const said = both.map((b) => describeRun(b.run)).join("\n");
    for (const { run, done, pastCharge } of both) {
      expect(run.code, said).toBe(0);
      expect(done?.status, said).toBe("success");
      // Mastra let both run the charge step: once made it one charge.
      expect(pastCharge, said).toBe(true);
    }
    expect(await ledger()).toEqual({ charges: 1, emails: 1 });
  });

  it.each(["charge", "email"] as const)(
    "resumed, SIGKILLed in the %s step after the provider acted, restarted by another process: each effect once",
    async (killIn) => {
      const { child, ledger } = runOf(`kill-${killIn}`);
      expect((await child("start")).done?.status).toBe("suspended");
      const crashed = await child("resume", { killIn });
      expect(crashed.run.signal, describeRun(crashed.run)).toBe("SIGKILL");
      expect(crashed.killed?.step).toBe(killIn);

      const restarted = await child("restart");
      expect(restarted.run.code, describeRun(restarted.run)).toBe(0);
      expect(restarted.done?.status, restarted.run.stdout).toBe("success");
      expect(await ledger()).toEqual({ charges: 1, emails: 1 });
    },
  );
});
