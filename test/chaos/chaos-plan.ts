import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { type ChaosToolName, chargeInput, receiptInput, ticketInput } from "./chaos-tools.js";
import { Random } from "./random.js";

/** One planned effect call: its step identity is fixed here, before anything is dispatched. */
export interface PlannedCall {
  i: number;
  taskId: string;
  stepId: string;
  tool: ChaosToolName;
  input: Record<string, unknown>;
}

export interface ChaosPlan {
  seed: number;
  calls: PlannedCall[];
}

/**
 * The orchestrator's plan, from the seed: tasks of one to four steps, each step one effect call on an order of
 * its own (so the provider's per-order count is a per-call count). A few calls ask the provider to refuse
 * (`before`) or drop the answer (`after`) on their first attempt, a few carry a currency the provider declines.
 */
export function makePlan(seed: number, calls: number): ChaosPlan {
  const random = new Random(seed).fork("plan");
  const planned: PlannedCall[] = [];
  let task = 0;
  while (planned.length < calls) {
    task += 1;
    const steps = random.int(1, 4);
    for (let step = 1; step <= steps && planned.length < calls; step++) {
      const i = planned.length;
      const orderId = `order-${seed}-${i}`;
      const roll = random.next();
      const failFirst = roll < 0.03 ? "before" : roll < 0.06 ? "after" : undefined;
      const flags = failFirst === undefined ? {} : { failFirst };
      const kind = random.next();
      let tool: ChaosToolName;
      let input: Record<string, unknown>;
      if (kind < 0.45) {
        tool = "charge_card";
        // 2 % of charges carry a currency the provider refuses: a terminal failure, stored and replayed.
        const currency = random.chance(0.02) ? "usd$" : "usd";
        input = chargeInput.parse({ orderId, amount: random.int(100, 99_999), currency, ...flags });
      } else if (kind < 0.75) {
        tool = "open_ticket";
        input = ticketInput.parse({ orderId, subject: `refund for ${orderId}`, ...flags });
      } else {
        tool = "send_receipt";
        input = receiptInput.parse({
          orderId,
          to: `customer-${i}@example.com`,
          subject: `receipt ${orderId}`,
          ...flags,
        });
      }
      planned.push({ i, taskId: `task-${seed}-${task}`, stepId: `step-${step}`, tool, input });
    }
  }
  return { seed, calls: planned };
}

/** Reads the plan back, or writes a new one (atomically: a crash never leaves half a plan). */
export function loadOrWritePlan(
  file: string,
  seed: number,
  calls: number,
): { plan: ChaosPlan; resumed: boolean } {
  if (existsSync(file)) return { plan: JSON.parse(readFileSync(file, "utf8")) as ChaosPlan, resumed: true };
  const plan = makePlan(seed, calls);
  writeFileSync(`${file}.tmp`, JSON.stringify(plan));
  renameSync(`${file}.tmp`, file);
  return { plan, resumed: false };
}

/** How a call ended, as the orchestrator wrote it down. */
export interface SettledCall {
  i: number;
  end: "done" | "failed" | "unknown" | "conflict";
  /** The provider's id of the effect the caller was handed (done). */
  id?: string;
  replayed?: boolean;
  /** When the orchestrator wrote it down (ms since the epoch). */
  at?: number;
}

/** The progress journal: one JSON line per settled call. A torn last line (a SIGKILL mid-write) is skipped. */
export function readProgress(file: string): Map<number, SettledCall> {
  const settled = new Map<number, SettledCall>();
  if (!existsSync(file)) return settled;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line.trim() === "") continue;
    try {
      const entry = JSON.parse(line) as SettledCall;
      settled.set(entry.i, entry);
    } catch {
      // The line a SIGKILL cut short: that call is simply dispatched again, with the same step id.
    }
  }
  return settled;
}
