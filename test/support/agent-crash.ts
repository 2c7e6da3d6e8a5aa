// The crash scenarios every agent-framework adapter must pass, in one place: the framework's own loop, in an
// orchestrator process SIGKILLed at each point where a crash could make a resumed agent repeat itself —
// during a model call, during a tool call (after the provider charged, before the result was stored), between
// the two tool calls of one turn, and after the last turn — then resumed with the same taskId, by a model that
// would choose another amount if asked again. Each package brings the child (test/agent-process.ts, built on
// agent-child.ts) and its test world; the suite counts at the provider: 0 duplicate effects, 0 model calls
// repeated for turns the store had recorded, and a transcript of the same shape as an uninterrupted run's,
// whose charge is the one the provider made.

import { deriveKey, type OnceStore } from "@once/core";
import { PaymentsClient } from "@once/payments";
import { describeRun, redisUrl, runCommand } from "@once/support";
import { describe, expect, it } from "vitest";
import type { AgentProcessConfig, KillPoint } from "./agent-child.js";

interface AgentEvent {
  event: string;
  turn?: number;
  answer?: string;
  steps?: { tool: string; input: { amount?: number } }[][];
}

/** One adapter under test: its package (whose test/agent-process.ts is the child) and its running world. */
export interface AgentCrashSubject {
  /** Names the orchestrator in the suite's title, e.g. "an AI SDK orchestrator". */
  orchestrator: string;
  packageRoot: string;
  /** Read when a test runs: the world's provider, key prefix and store, made by the package's beforeAll. */
  world: () => { paymentsUrl: string; prefix: string; store: OnceStore };
}

const SHAPE = [["get_order_status"], ["charge_customer", "send_email"], ["set_status"], []];
const shapeOf = (steps: AgentEvent["steps"]) => steps?.map((calls) => calls.map((c) => c.tool).sort());

export function describeAgentCrashes(subject: AgentCrashSubject): void {
  async function runAgentProcess(config: AgentProcessConfig) {
    const run = await runCommand(process.execPath, ["--import", "tsx", "test/agent-process.ts"], {
      cwd: subject.packageRoot,
      env: { ...process.env, ONCE_AGENT_CONFIG: JSON.stringify(config) },
      timeoutMs: 60_000,
    });
    const events = run.stdout
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as AgentEvent);
    return { run, events, modelCalls: events.filter((e) => e.event === "model-call").map((e) => e.turn) };
  }

  /** The turns of the task the store holds as done: asked and recorded. */
  async function recordedTurns(taskId: string): Promise<number[]> {
    const { store } = subject.world();
    const turns: number[] = [];
    for (let n = 0; n < 6; n++) {
      if ((await store.get(deriveKey({ taskId, stepId: `turn-${n}` })))?.state === "done") turns.push(n);
    }
    return turns;
  }

  /** One order's task, run by an orchestrator process on the world's store and provider; leases of 1 s. */
  function configFor(orderId: string): AgentProcessConfig {
    const { paymentsUrl, prefix } = subject.world();
    return { redisUrl: redisUrl(), prefix, paymentsUrl, taskId: `task-${orderId}`, orderId, leaseMs: 1_000 };
  }

  async function ledger(orderId: string) {
    const client = new PaymentsClient(subject.world().paymentsUrl);
    return { charges: await client.findCharges({ orderId }), emails: await client.findEmails({ orderId }) };
  }

  describe(`${subject.orchestrator} SIGKILLed, then resumed with the same taskId`, () => {
    it.each<KillPoint>(["model-call", "tool-call", "between-tool-calls", "after-last-turn"])(
      "killed at %s: no duplicate effect, no recorded turn asked again, the transcript of an uninterrupted run",
      async (killAt) => {
        const orderId = `order-${killAt}-${process.pid}`;
        const config = configFor(orderId);
        const crashed = await runAgentProcess({ ...config, killAt });
        expect(crashed.run.signal, describeRun(crashed.run)).toBe("SIGKILL");
        expect(crashed.events.at(-1)).toMatchObject({ event: "killed", point: killAt });
        const recorded = await recordedTurns(config.taskId);

        const resumed = await runAgentProcess(config);
        expect(resumed.run.code, describeRun(resumed.run)).toBe(0);
        // No turn the store had recorded was asked again; every other turn was asked exactly once.
        expect(resumed.modelCalls.filter((turn) => recorded.includes(turn as number))).toEqual([]);
        expect(resumed.modelCalls).toEqual([0, 1, 2, 3].filter((turn) => !recorded.includes(turn)));

        const done = resumed.events.find((e) => e.event === "done");
        expect(shapeOf(done?.steps)).toEqual(SHAPE);
        expect(done?.answer).toBe(`order ${orderId} is paid`);
        const { charges, emails } = await ledger(orderId);
        expect(charges).toHaveLength(1);
        expect(emails).toHaveLength(1);
        // The amount the resumed run's transcript says it charged is the one the provider charged.
        const chargeCall = done?.steps?.[1]?.find((c) => c.tool === "charge_customer");
        expect(chargeCall?.input.amount).toBe(charges[0]?.amount);
      },
    );

    it("two orchestrators resuming the same task at once: one model call per turn, one effect per call", async () => {
      const orderId = `order-two-${process.pid}`;
      const config = configFor(orderId);
      const crashed = await runAgentProcess({ ...config, killAt: "tool-call" });
      expect(crashed.run.signal, describeRun(crashed.run)).toBe("SIGKILL");
      const recorded = await recordedTurns(config.taskId);

      const both = await Promise.all([runAgentProcess(config), runAgentProcess(config)]);
      for (const { run } of both) expect(run.code, describeRun(run)).toBe(0);
      const asked = both.flatMap((b) => b.modelCalls).sort();
      expect(asked).toEqual([0, 1, 2, 3].filter((turn) => !recorded.includes(turn)));
      const [a, b] = both.map(({ events }) => events.find((e) => e.event === "done"));
      expect(a?.steps).toEqual(b?.steps);
      expect(a?.answer).toBe(`order ${orderId} is paid`);
      const { charges, emails } = await ledger(orderId);
      expect(charges).toHaveLength(1);
      expect(emails).toHaveLength(1);
    });
  });
}
