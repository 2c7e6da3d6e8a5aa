import { fileURLToPath } from "node:url";
import { NodeChild } from "@once/support";
import type { ChildConfig } from "./protocol.js";

/** The compiled child script (child.ts). */
const CHILD_SCRIPT = fileURLToPath(new URL("./child.js", import.meta.url));

/** Starts a side's child process; its events are the JSON lines it prints. */
export function startChild(config: ChildConfig, name: string): NodeChild {
  return NodeChild.start({
    script: CHILD_SCRIPT,
    args: [JSON.stringify(config)],
    name,
    eventKey: "type",
    stopGraceMs: 20_000,
    // Each engine's own logging at warnings only (Restate's SDK logs every invocation at INFO): the bench
    // measures the engine, not its console.
    env: { ...process.env, RESTATE_LOGGING: "WARN", DEBUG: "" },
  });
}

/** The child's error event, or its exit, as an Error with what it printed. */
export function childFailure(child: NodeChild, what: string): Error {
  const error = child.events.find((e) => e.type === "error");
  const message = typeof error?.message === "string" ? error.message : child.stderr().trim().slice(-1500);
  return new Error(`${what}: ${message.split("\n").slice(0, 8).join("\n")}`);
}
