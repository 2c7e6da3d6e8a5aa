import { type Dispatcher, InProcess } from "@once/bullmq";
import {
  type AnyTool,
  DEFAULT_NAMESPACE,
  defineTool,
  IdempotencyConflictError,
  InvalidToolError,
  type OnceStore,
  validateKeyPart,
} from "@once/core";
import { trace } from "@opentelemetry/api";
import { type LanguageModelMiddleware, type Tool, tool, wrapLanguageModel } from "ai";
import { z } from "zod";
import { RecordedTurnMismatchError, UnrecordedToolCallError } from "./errors.js";
import {
  type ModelCallParams,
  type ModelOfCall,
  type RecordedTurn,
  recordGenerate,
  recordStream,
  replayGenerate,
  replayStream,
  type TurnMode,
  toolCallsOf,
  turnRequest,
} from "./recorded-turn.js";

export interface OnceTaskOptions {
  /** The task's own id, stable across crashes: call `onceTask` again with it to resume. */
  taskId: string;
  store: OnceStore;
  /** once tools (`defineTool`): the agent's tools, whose calls go through once. */
  tools: readonly AnyTool[];
  /** Default "default". */
  namespace?: string;
  /**
   * Effect tools through this dispatcher to workers, instead of in this process. Read and write tools always
   * run here: their results are recorded with the turn, so a resumed loop sees the same answers.
   */
  dispatcher?: Dispatcher;
  /** Lease of a model turn's owner: how long a crashed model call holds its turn before it is asked again. Default 30 s. */
  turnLeaseMs?: number;
  /** Lease of a tool call's owner, unless the tool sets its own. Default 30 s. */
  leaseMs?: number;
  /** Largest model response or tool result stored, in bytes of JSON. Default 1 MiB: a larger one is refused, never truncated. */
  maxResultBytes?: number;
}

/** A durable agent task: the model wrapped so each turn is recorded, and the tools, keyed from the turns. */
export interface OnceTask {
  readonly taskId: string;
  /** The model for `generateText` / `streamText` / `ToolLoopAgent`: each call is a recorded turn. */
  model(model: ModelOfCall): ModelOfCall;
  /** The AI SDK tools, by name: each call runs once, keyed from the turn that made it. */
  readonly tools: Record<string, Tool>;
  /** The middleware itself, for `wrapLanguageModel` with other middleware. */
  readonly middleware: LanguageModelMiddleware;
}

const TURN_TOOL = "model_turn";

/**
 * A durable agent task. Each model call is a step of its own, `turn-<n>` of the task, claimed and stored
 * before any of its tool calls is dispatched; each tool call is the step `turn-<n>/<toolCallId>`, the id the
 * recorded turn gave it. Run the loop as usual; after a crash, run it again with the same `taskId`: recorded
 * turns are replayed instead of asking the model again, so the same calls go out under the same keys, and each
 * replays or joins the call still in flight. A crash during a model call asks the model again — safe, since
 * none of that turn's calls was dispatched.
 */
export function onceTask(options: OnceTaskOptions): OnceTask {
  const taskId = validateKeyPart("taskId", options.taskId);
  const namespace = validateKeyPart("namespace", options.namespace ?? DEFAULT_NAMESPACE);
  const byName = new Map<string, AnyTool>();
  for (const candidate of options.tools) byName.set(checkedTool(candidate).name, candidate);

  /** The model calls of this run waiting for their turn's record: `run` of the turn tool picks them up. */
  const asking = new Map<string, () => Promise<RecordedTurn>>();
  const turnTool = defineTool({
    name: TURN_TOOL,
    kind: "effect",
    description: "One model call of an agent task, recorded before its tool calls are dispatched.",
    input: z
      .object({ mode: z.enum(["generate", "stream"]), provider: z.string(), modelId: z.string() })
      .loose(),
    output: z.custom<RecordedTurn>((value) => typeof value === "object" && value !== null),
    run: (input, ctx) => {
      // The model call itself is aborted by the SDK's own signal (in its params), not by the turn's lease: a
      // call that outlived its lease is not recorded (its complete is refused), and the turn is asked again.
      const ask = asking.get(ctx.stepId);
      if (!ask) throw new Error(`no model call is waiting for ${ctx.stepId}`);
      // The span of the effect is the model call: it gets the GenAI semantic conventions' names (no prompt or
      // completion text, which stay out of telemetry).
      trace.getActiveSpan()?.setAttributes({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": input.provider,
        "gen_ai.request.model": input.modelId,
      });
      return ask();
    },
    // A model call changes nothing outside: if its owner died, ask again.
    reconcile: async () => ({ applied: false }),
    classifyError: () => "not_applied",
    ...(options.turnLeaseMs === undefined ? {} : { leaseMs: options.turnLeaseMs }),
  });
  const journaled = new Map([...byName].map(([name, declared]) => [name, journal(declared)]));
  const maxResultBytes =
    options.maxResultBytes === undefined ? {} : { maxResultBytes: options.maxResultBytes };
  // One attempt per turn: a failed model call is the SDK's to retry (its own `maxRetries`), as the same turn.
  const turns = new InProcess({
    store: options.store,
    tools: [turnTool],
    namespace,
    attempts: 1,
    ...maxResultBytes,
  });
  const calls = new InProcess({
    store: options.store,
    tools: [...journaled.values()],
    namespace,
    ...maxResultBytes,
    ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
  });

  let nextTurn = 0;
  /** Which turn made each tool call, from the recorded turns (fresh or replayed). */
  const turnOf = new Map<string, number>();

  async function takeTurn(
    mode: TurnMode,
    model: ModelOfCall,
    params: ModelCallParams,
    ask: () => Promise<RecordedTurn>,
  ): Promise<RecordedTurn> {
    // A turn's number is taken when it succeeds: a failed call the SDK retries is the same turn.
    const turn = nextTurn;
    const stepId = `turn-${turn}`;
    asking.set(stepId, ask);
    let recorded: RecordedTurn;
    try {
      const request = turnRequest(mode, model, params);
      const answer = await turns.call(turnTool, request as never, {
        taskId,
        stepId,
        ...(params.abortSignal ? { signal: params.abortSignal } : {}),
      });
      recorded = answer.result as RecordedTurn;
    } catch (error) {
      if (error instanceof IdempotencyConflictError) {
        throw new IdempotencyConflictError(
          error.key,
          error.tool,
          error.storedTool,
          `turn ${turn} of task ${JSON.stringify(taskId)} (its model or prompt differs from the recorded turn)`,
        );
      }
      throw error;
    } finally {
      asking.delete(stepId);
    }
    for (const call of toolCallsOf(recorded)) {
      const known = byName.get(call.toolName);
      if (!known)
        throw new RecordedTurnMismatchError(taskId, turn, call.toolName, "is not among the tools given");
      if (!parsesAs(known, call.input))
        throw new RecordedTurnMismatchError(taskId, turn, call.toolName, "now refuses the recorded input");
      turnOf.set(call.toolCallId, turn);
    }
    nextTurn = turn + 1;
    return recorded;
  }

  const middleware: LanguageModelMiddleware = {
    wrapGenerate: async ({ doGenerate, params, model }) => {
      const recorded = await takeTurn("generate", model, params, async () =>
        recordGenerate(await doGenerate()),
      );
      // The mode is in the turn's fingerprint: a turn recorded by the other mode is a conflict, never here.
      return replayGenerate(recorded as RecordedTurn & { mode: "generate" });
    },
    wrapStream: async ({ doStream, params, model }) => {
      const recorded = await takeTurn("stream", model, params, async () =>
        recordStream((await doStream()).stream),
      );
      return replayStream(recorded as RecordedTurn & { mode: "stream" });
    },
  };

  const tools: Record<string, Tool> = {};
  for (const [name, declared] of byName) {
    const runnable = journaled.get(name) as AnyTool;
    tools[name] = tool({
      ...(declared.description === undefined ? {} : { description: declared.description }),
      inputSchema: declared.input,
      execute: async (
        input: unknown,
        { toolCallId, abortSignal }: { toolCallId: string; abortSignal?: AbortSignal },
      ) => {
        const turn = turnOf.get(toolCallId);
        if (turn === undefined) throw new UnrecordedToolCallError(name, toolCallId);
        const step = { taskId, stepId: `turn-${turn}/${toolCallId}`, namespace };
        if (declared.kind === "effect" && options.dispatcher)
          return (await options.dispatcher.call(declared, input as never, step)).result;
        return (
          await calls.call(runnable, input as never, {
            ...step,
            ...(abortSignal ? { signal: abortSignal } : {}),
          })
        ).result;
      },
    } as Tool);
  }

  return {
    taskId,
    model: (model) => wrapLanguageModel({ model, middleware }) as ModelOfCall,
    tools,
    middleware,
  };
}

/** Effect tools run as they are; read and write tools become recorded steps (re-run if their owner died). */
function journal(declared: AnyTool): AnyTool {
  if (declared.kind === "effect") return declared;
  return defineTool({
    name: declared.name,
    kind: "effect",
    ...(declared.description === undefined ? {} : { description: declared.description }),
    input: declared.input,
    output: declared.output,
    run: (input, ctx) => declared.run(input, ctx, undefined),
    // Safe to repeat by its kind: if its owner died, run it again.
    reconcile: async () => ({ applied: false }),
    classifyError: () => "not_applied",
  });
}

/** A once tool, not an AI SDK tool or anything else: it must have a kind and zod schemas. */
function checkedTool(candidate: unknown): AnyTool {
  const t = candidate as Partial<AnyTool> | undefined;
  const name = typeof t?.name === "string" ? t.name : "(unnamed)";
  if (t?.kind === undefined)
    throw new InvalidToolError(
      name,
      "is not a once tool: declare it with defineTool and a kind (read, write or effect)",
    );
  if (typeof t.input?.safeParse !== "function") throw new InvalidToolError(name, "has no zod input schema");
  if (t.name === TURN_TOOL) throw new InvalidToolError(name, `the name ${TURN_TOOL} is the model turns' own`);
  return t as AnyTool;
}

function parsesAs(declared: AnyTool, input: string): boolean {
  try {
    return declared.input.safeParse(JSON.parse(input)).success;
  } catch {
    return false;
  }
}
