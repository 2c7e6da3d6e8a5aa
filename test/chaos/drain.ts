// The drain, once the faults are over: the orchestrator is told so, drives every call to an end (its last
// audit re-drives steps a thawed worker re-opened) and exits; then the queue must stay empty. A run that does
// not get there in time is a broken harness, not a finding: it throws.

import { writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import type { ChaosFleet } from "./chaos-fleet.js";
import type { ChaosWorld } from "./chaos-world.js";

/** How many looks in a row, 500 ms apart, must find the queue empty. */
const QUIET_LOOKS = 3;

/** Drains the run; resolves once nothing is left for a worker to do. */
export async function drain(world: ChaosWorld, fleet: ChaosFleet, timeoutMs: number): Promise<void> {
  writeFileSync(world.faultsOverFile, "");
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const current = fleet.orchestrator;
    const finished = await Promise.race([
      current.exited.then(() => true),
      sleep(Math.max(0, deadline - Date.now())).then(() => false),
    ]);
    if (!finished)
      throw new Error(`the orchestrator did not finish within the drain timeout\n${current.stderr()}`);
    if (current === fleet.orchestrator) break;
  }
  const finishedEvent = fleet.orchestrator.events.find((e) => e.e === "finished");
  if (!finishedEvent)
    throw new Error(`the orchestrator exited without finishing:\n${fleet.orchestrator.stderr()}`);
  // Nothing may be left for a worker to do: re-enqueued jobs, delayed in-flight waits.
  let quiet = 0;
  while (quiet < QUIET_LOOKS) {
    if (Date.now() > deadline) throw new Error("the queue did not drain within the drain timeout");
    const counts = await world.inspectQueue.getJobCounts(
      "waiting",
      "active",
      "delayed",
      "prioritized",
      "waiting-children",
    );
    quiet = Object.values(counts).every((n) => n === 0) ? quiet + 1 : 0;
    await sleep(500);
  }
}
