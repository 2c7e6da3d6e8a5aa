// Worker child processes for the scenario tests: test/fixtures/worker-process.ts run with
// `node --import tsx`, its JSON event lines (named by `event`) collected so a test can wait for "charged"
// and SIGKILL the process on that line, freeze it with SIGSTOP, or count what it did.
//
// The scenario stops the workers it started; any still running when the test process exits is killed.

import path from "node:path";
import { fileURLToPath } from "node:url";
import { NodeChild } from "@once/support";
import { IN_PROCESS_CALL_ENV, type InProcessCallConfig } from "../fixtures/in-process-call-config.js";
import { WORKER_CONFIG_ENV, type WorkerProcessConfig } from "../fixtures/worker-config.js";

const testRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const fixture = path.join(testRoot, "fixtures/worker-process.ts");

/** One line a worker printed. */
export interface WorkerEvent {
  event: string;
  pid: number;
  at: number;
  [field: string]: unknown;
}

export type WorkerProcess = NodeChild<WorkerEvent>;

let counter = 0;

/**
 * Starts a worker process with `config` and resolves when it printed `ready` (its worker is listening).
 * Rejects, after killing it, if it exits or does not get ready within 30 s.
 */
export async function startWorkerProcess(
  config: WorkerProcessConfig,
  options: { name?: string } = {},
): Promise<WorkerProcess> {
  counter += 1;
  return NodeChild.startReady<WorkerEvent>({
    name: options.name ?? `worker-${counter}`,
    script: fixture,
    nodeArgs: ["--import", "tsx"],
    // `--import tsx` resolves from the working directory: test/ has tsx in its node_modules.
    cwd: testRoot,
    env: { ...process.env, [WORKER_CONFIG_ENV]: JSON.stringify(config) },
    eventKey: "event",
    // The fixture exits when its stdin ends: a worker never outlives the test process.
    holdStdin: true,
    stopGraceMs: 5_000,
    ready: "ready",
  });
}

const inProcessFixture = path.join(testRoot, "fixtures/in-process-call.ts");

/** One line an in-process caller printed (test/fixtures/in-process-call.ts). */
export interface CallerEvent {
  event: string;
  pid: number;
  at: number;
  [field: string]: unknown;
}

/**
 * Starts a caller process that runs one charge through `InProcess` on the scenario's Redis store, with its
 * settings as JSON in `ONCE_IN_PROCESS_CALL`; it prints `settled` and exits when the call is answered.
 */
export function startInProcessCall(config: InProcessCallConfig): NodeChild<CallerEvent> {
  counter += 1;
  return NodeChild.start<CallerEvent>({
    name: `caller-${counter}`,
    script: inProcessFixture,
    nodeArgs: ["--import", "tsx"],
    cwd: testRoot,
    env: { ...process.env, [IN_PROCESS_CALL_ENV]: JSON.stringify(config) },
    eventKey: "event",
    stopGraceMs: 5_000,
  });
}
