// The harness of the approval crash scenarios, in one place: each package's test/approval-crash.test.ts runs its
// child (test/approval-process.ts, built on agent-child.ts) SIGKILLed while a charge waits for approval,
// restarts it, then has the operator approve on the record and two children resume at once. The package keeps
// what is its own: its child's settings and the checks of its framework's request.

import type { OnceStore } from "@once/core";
import { PaymentsClient } from "@once/payments";
import type { RedisOperatorStore } from "@once/redis";
import { describeRun, runCommand } from "@once/support";
import { expect } from "vitest";
import type { AgentProcessConfig } from "./agent-child.js";

/** What every approval child prints: its model calls, its charge, and when done its answer and each turn's calls. */
export interface ApprovalChildEvent {
  event: string;
  turn?: number;
  answer?: string;
  steps?: { tool: string; input: { amount?: number } }[][];
}

/** One run of the child: how it ended, its events, the first event of a name, and the turns it asked the model. */
export interface ApprovalChildRun<Event extends ApprovalChildEvent> {
  run: Awaited<ReturnType<typeof runCommand>>;
  events: Event[];
  find: (name: string) => Event | undefined;
  modelCalls: (number | undefined)[];
}

/** Runs the package's test/approval-process.ts with `config` as ONCE_AGENT_CONFIG and `env` beside it. */
export function approvalChild<Event extends ApprovalChildEvent>(packageRoot: string) {
  return async (
    config: AgentProcessConfig,
    env: Record<string, string> = {},
  ): Promise<ApprovalChildRun<Event>> => {
    const run = await runCommand(process.execPath, ["--import", "tsx", "test/approval-process.ts"], {
      cwd: packageRoot,
      env: { ...process.env, ONCE_AGENT_CONFIG: JSON.stringify(config), ...env },
      timeoutMs: 60_000,
    });
    const events = run.stdout
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as Event);
    const find = (name: string) => events.find((e) => e.event === name);
    return {
      run,
      events,
      find,
      modelCalls: events.filter((e) => e.event === "model-call").map((e) => e.turn),
    };
  };
}

export interface ApproveThenResumeTwice<Event extends ApprovalChildEvent> {
  operator: RedisOperatorStore;
  store: OnceStore;
  paymentsUrl: string;
  orderId: string;
  /** The key of the record that awaits approval. */
  key: string;
  /** One child resuming the task, ready to act together with another. */
  resume: () => Promise<ApprovalChildRun<Event>>;
}

/**
 * The operator approves the record at `key`, then two children resume at once: both finish and the order is
 * paid, the turns after the approval are asked once between the two, the provider charged once and emailed
 * once, and the record is done with the operator's decision. Returns both children's `done` and the charges.
 */
export async function approveThenResumeTwice<Event extends ApprovalChildEvent>(
  options: ApproveThenResumeTwice<Event>,
) {
  const { operator, store, orderId, key } = options;
  const client = new PaymentsClient(options.paymentsUrl);
  await operator.approve(key, { by: "alice@example.com", why: "customer confirmed by phone" });

  const both = await Promise.all([options.resume(), options.resume()]);
  for (const { run } of both) expect(run.code, describeRun(run)).toBe(0);
  const [a, b] = both.map(({ find }) => find("done"));
  expect(a?.answer).toBe(`order ${orderId} is paid`);
  // Turns 2 and 3 were asked once between the two; the turns before were not asked again.
  expect(both.flatMap((child) => child.modelCalls).sort()).toEqual([2, 3]);
  const charges = await client.findCharges({ orderId });
  expect(charges).toHaveLength(1);
  expect(await client.findEmails({ orderId })).toHaveLength(1);
  expect(both.flatMap((child) => child.events.filter((e) => e.event === "charged"))).toHaveLength(1);
  expect(await store.get(key)).toMatchObject({
    state: "done",
    approval: { decision: { as: "approved", by: "alice@example.com" } },
  });
  return { a, b, charges };
}
