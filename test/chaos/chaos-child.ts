// The worker and orchestrator processes of the chaos suite: `node --import tsx <script>` from test/, their
// JSON lines named by `e` (short: a worker prints one for every store call).

import path from "node:path";
import { fileURLToPath } from "node:url";
import { NodeChild } from "@once/support";

const testRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** One JSON line a chaos child printed. */
export interface ChildEvent {
  e: string;
  at: number;
  [field: string]: unknown;
}

export type ChaosChild = NodeChild<ChildEvent>;

const started = new Set<ChaosChild>();

/**
 * Spawns `script` (relative to test/) with `env` added and resolves when it prints `readyEvent`. Every one
 * started is stopped by `stopAllChaosChildren()`, and killed if the suite exits first.
 */
export async function startChaosChild(options: {
  name: string;
  script: string;
  env: Record<string, string>;
  readyEvent: string;
  onEvent?: (child: ChaosChild, event: ChildEvent) => void;
  timeoutMs?: number;
}): Promise<ChaosChild> {
  const { onEvent } = options;
  const child = await NodeChild.startReady<ChildEvent>({
    name: options.name,
    script: options.script,
    nodeArgs: ["--import", "tsx"],
    cwd: testRoot,
    env: { ...process.env, ...options.env },
    eventKey: "e",
    // A child exits when its stdin ends: none outlives the suite.
    holdStdin: true,
    stopGraceMs: 5_000,
    ...(onEvent ? { onEvent: (event: ChildEvent, child: ChaosChild) => onEvent(child, event) } : {}),
    ready: options.readyEvent,
    timeoutMs: options.timeoutMs ?? 60_000,
  });
  started.add(child);
  return child;
}

/** Stops every chaos child this process started and has not stopped yet. */
export async function stopAllChaosChildren(): Promise<void> {
  await Promise.all([...started].map((child) => child.stop()));
  started.clear();
}
