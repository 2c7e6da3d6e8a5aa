// The child's side of the agent crash scenarios (agent-crash.ts): what each package's test/agent-process.ts
// reads and prints. No vitest here: the child is a plain Node process.

/** Where the child kills itself: inside turn 1's model call, after the charge, between the turn's two calls, after the last turn. */
export type KillPoint = "model-call" | "tool-call" | "between-tool-calls" | "after-last-turn";

/** The child's settings, as JSON in ONCE_AGENT_CONFIG. */
export interface AgentProcessConfig {
  redisUrl: string;
  prefix: string;
  paymentsUrl: string;
  taskId: string;
  orderId: string;
  leaseMs: number;
  killAt?: KillPoint;
}

/**
 * The child's side of the protocol: its settings, `emit` for one JSON line per event (`model-call` with its
 * turn, `charged`, `done` with the final `answer` and each turn's tool calls as `steps`), and `die`, which
 * says where and SIGKILLs the process — a real crash, mid-flight, with nothing cleaned up.
 */
export function agentChild() {
  const config = JSON.parse(process.env.ONCE_AGENT_CONFIG ?? "null") as AgentProcessConfig;
  const emit = (event: string, fields: Record<string, unknown> = {}) =>
    process.stdout.write(`${JSON.stringify({ event, ...fields })}\n`);
  const die = (point: KillPoint): Promise<never> => {
    emit("killed", { point });
    process.kill(process.pid, "SIGKILL");
    return new Promise<never>(() => {});
  };
  return { config, emit, die };
}
