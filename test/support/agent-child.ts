// The child's side of the agent crash scenarios (agent-crash.ts): what each package's test/agent-process.ts
// reads and prints. No vitest here: the child is a plain Node process.

/**
 * Where the child kills itself: inside turn 1's model call, after the charge, between the turn's two calls, after
 * the last turn; or, in the approval scenarios, once its loop stopped on a call that waits for approval.
 */
export type KillPoint =
  | "model-call"
  | "tool-call"
  | "between-tool-calls"
  | "after-last-turn"
  | "approval-requested";

/** The child's settings, as JSON in ONCE_AGENT_CONFIG. */
export interface AgentProcessConfig {
  redisUrl: string;
  prefix: string;
  paymentsUrl: string;
  taskId: string;
  orderId: string;
  leaseMs: number;
  killAt?: KillPoint;
  /** When set, the child waits until this many children of its task are ready, so that they act at once. */
  together?: number;
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

/**
 * The kill points every child shares, as hooks for its order tools and its scripted model: `toolHooks` say
 * `charged` and die after the charge (`tool-call`) or, once the charge's result is stored, before the email
 * (`between-tool-calls`); `answering` says `model-call` and dies inside turn 1's model call (`model-call`).
 * The child calls `chargeStored` once the adapter has stored the charge's result.
 */
export function crashPoints({ config, emit, die }: ReturnType<typeof agentChild>) {
  let chargeStored: () => void = () => {};
  const charged = new Promise<void>((resolve) => {
    chargeStored = resolve;
  });
  return {
    toolHooks: {
      afterCharge: () => {
        emit("charged");
        if (config.killAt === "tool-call") return die("tool-call");
      },
      beforeEmail: async () => {
        if (config.killAt !== "between-tool-calls") return;
        await charged; // the charge is stored: the turn's first call is over, its second not begun
        return die("between-tool-calls");
      },
    },
    answering: (turn: number) => {
      emit("model-call", { turn });
      if (config.killAt === "model-call" && turn === 1) return die("model-call");
    },
    chargeStored: () => chargeStored(),
  };
}
