import { type Dispatcher, InProcess } from "@once/bullmq";
import {
  type AnyTool,
  CallFailedError,
  DEFAULT_NAMESPACE,
  defineTool,
  IdempotencyConflictError,
  InvalidToolError,
  type OnceStore,
  ReplayedFailureError,
  validateKeyPart,
} from "@once/core";
import { trace } from "@opentelemetry/api";
import { z } from "zod";
import { RecordedTurnMismatchError, UnrecordedToolCallError, UnsettledToolCallError } from "./errors.js";

export interface AgentTaskOptions {
  /** The task's own id, stable across crashes: build the task again with it to resume. */
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

/**
 * What a turn's fingerprint covers: the model (`provider`, `modelId`) and everything it was asked, as JSON. Two
 * asks of one turn that differ here are a conflict, never a silent re-ask.
 */
export interface TurnRequest {
  provider: string;
  modelId: string;
  [field: string]: unknown;
}

/** One tool call a model response made, as the framework names it. */
export interface TurnToolCall {
  toolCallId: string;
  toolName: string;
  /** The input as the framework hands it to the tool (parsed JSON). */
  input: unknown;
}

/** The step a tool call of a recorded turn runs as. */
export interface TurnStep {
  taskId: string;
  stepId: string;
  namespace: string;
}

/** What a turn's record holds: the framework's response, and which of its calls the tools accepted then. */
interface TurnRecord<Response> {
  response: Response;
  /** Calls whose tool existed and whose input parsed when the turn was recorded: a replay holds them to it. */
  accepted: string[];
}

const TURN_TOOL = "model_turn";

/**
 * The recorded-turn rule for any agent loop: each model call is a step of its own, `turn-<n>` of the task,
 * claimed and stored before any of its tool calls is dispatched; each tool call is the step
 * `turn-<n>/<toolCallId>`, the id the recorded turn gave it. After a crash, a loop run again with the same
 * `taskId` gets its recorded turns back instead of asking the model again, so the same calls go out under the
 * same keys, and each replays or joins the call still in flight. A crash during a model call asks the model
 * again — safe, since none of that turn's calls was dispatched. Framework adapters (`@once/ai`,
 * `@once/openai-agents`) are thin layers over this.
 */
export class AgentTask {
  readonly taskId: string;
  readonly namespace: string;
  readonly #tools = new Map<string, AnyTool>();
  readonly #journaled = new Map<string, AnyTool>();
  readonly #dispatcher: Dispatcher | undefined;
  readonly #turnTool: AnyTool;
  readonly #turns: InProcess;
  readonly #calls: InProcess;
  /** The model calls of this run waiting for their turn's record: `run` of the turn tool picks them up. */
  readonly #asking = new Map<string, () => Promise<TurnRecord<unknown>>>();
  /** Which turn made each tool call, from the recorded turns (fresh or replayed). */
  readonly #turnOf = new Map<string, number>();
  /** Effect calls of this run that ended without a stored outcome, by call id: no further turn is asked. */
  readonly #unsettled = new Map<string, { tool: string; error: unknown }>();
  #nextTurn = 0;

  constructor(options: AgentTaskOptions) {
    this.taskId = validateKeyPart("taskId", options.taskId);
    this.namespace = validateKeyPart("namespace", options.namespace ?? DEFAULT_NAMESPACE);
    for (const candidate of options.tools) {
      const declared = checkedTool(candidate);
      this.#tools.set(declared.name, declared);
      this.#journaled.set(declared.name, journal(declared));
    }
    this.#dispatcher = options.dispatcher;
    this.#turnTool = defineTool({
      name: TURN_TOOL,
      kind: "effect",
      description: "One model call of an agent task, recorded before its tool calls are dispatched.",
      input: z.object({ provider: z.string(), modelId: z.string() }).loose(),
      output: z.custom<TurnRecord<unknown>>((value) => typeof value === "object" && value !== null),
      run: (input, ctx) => {
        // The model call itself is aborted by the framework's own signal, not by the turn's lease: a call that
        // outlived its lease is not recorded (its complete is refused), and the turn is asked again.
        const ask = this.#asking.get(ctx.stepId);
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
    const maxResultBytes =
      options.maxResultBytes === undefined ? {} : { maxResultBytes: options.maxResultBytes };
    // One attempt per turn: a failed model call is the framework's to retry, as the same turn.
    this.#turns = new InProcess({
      store: options.store,
      tools: [this.#turnTool],
      namespace: this.namespace,
      attempts: 1,
      ...maxResultBytes,
    });
    this.#calls = new InProcess({
      store: options.store,
      tools: [...this.#journaled.values()],
      namespace: this.namespace,
      ...maxResultBytes,
      ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
    });
  }

  /** The once tools given, by name. */
  get tools(): ReadonlyMap<string, AnyTool> {
    return this.#tools;
  }

  /**
   * The task's next model call: recorded from `ask` the first time, the stored response every time after.
   * `request` is fingerprinted (a resumed task that asks another thing for a recorded turn gets
   * `IdempotencyConflictError` naming the turn); `callsOf` names the tool calls a response made. The response
   * must be JSON (Dates come back as strings: the adapter revives them).
   */
  async turn<Response>(
    request: TurnRequest,
    ask: () => Promise<Response>,
    callsOf: (response: Response) => TurnToolCall[],
    options: { signal?: AbortSignal } = {},
  ): Promise<Response> {
    // A turn's number is taken when it succeeds: a failed call the framework retries is the same turn.
    const turn = this.#nextTurn;
    const stepId = `turn-${turn}`;
    const [unsettled] = this.#unsettled;
    if (unsettled) {
      const [toolCallId, { tool, error }] = unsettled;
      throw new UnsettledToolCallError(this.taskId, turn, tool, toolCallId, { cause: error });
    }
    this.#asking.set(stepId, async () => {
      const response = await ask();
      const accepted = callsOf(response).filter((call) => this.#accepts(call));
      return { response, accepted: accepted.map((call) => call.toolCallId) };
    });
    let recorded: TurnRecord<Response>;
    try {
      // Through JSON once: what the record will compare is what JSON keeps (no undefined, Dates as strings).
      const input = JSON.parse(JSON.stringify(request)) as never;
      const answer = await this.#turns.call(this.#turnTool, input, {
        taskId: this.taskId,
        stepId,
        ...(options.signal ? { signal: options.signal } : {}),
      });
      recorded = answer.result as TurnRecord<Response>;
    } catch (error) {
      if (error instanceof IdempotencyConflictError) {
        throw new IdempotencyConflictError(
          error.key,
          error.tool,
          error.storedTool,
          `turn ${turn} of task ${JSON.stringify(this.taskId)} (its model or prompt differs from the recorded turn)`,
        );
      }
      throw error;
    } finally {
      this.#asking.delete(stepId);
    }
    // A replayed turn is held to the tools it was recorded with; a call they refused then is the framework's
    // to answer (an unknown tool or an invalid input), the same way every time.
    const accepted = new Set(recorded.accepted);
    for (const call of callsOf(recorded.response)) {
      if (accepted.has(call.toolCallId)) {
        const known = this.#tools.get(call.toolName);
        if (!known)
          throw new RecordedTurnMismatchError(
            this.taskId,
            turn,
            call.toolName,
            "is not among the tools given",
          );
        if (!known.input.safeParse(call.input).success)
          throw new RecordedTurnMismatchError(
            this.taskId,
            turn,
            call.toolName,
            "now refuses the recorded input",
          );
      }
      this.#turnOf.set(call.toolCallId, turn);
    }
    this.#nextTurn = turn + 1;
    return recorded.response;
  }

  /** The step a tool call of a recorded turn runs as; for a call no recorded turn made, `UnrecordedToolCallError`. */
  stepOf(toolName: string, toolCallId: string): TurnStep {
    const turn = this.#turnOf.get(toolCallId);
    if (turn === undefined) throw new UnrecordedToolCallError(toolName, toolCallId);
    return { taskId: this.taskId, stepId: `turn-${turn}/${toolCallId}`, namespace: this.namespace };
  }

  /**
   * Runs a tool call of a recorded turn once: an effect through the dispatcher when there is one, else here;
   * a read or write here, its result recorded under its step so a resumed loop sees the same answer.
   */
  async call(
    toolName: string,
    toolCallId: string,
    input: unknown,
    options: { signal?: AbortSignal } = {},
  ): Promise<unknown> {
    const declared = this.#tools.get(toolName);
    const runnable = this.#journaled.get(toolName);
    if (!declared || !runnable)
      throw new InvalidToolError(toolName, `is not among the tools of task ${JSON.stringify(this.taskId)}`);
    const step = this.stepOf(toolName, toolCallId);
    try {
      if (declared.kind === "effect" && this.#dispatcher)
        return (await this.#dispatcher.call(declared, input as never, step)).result;
      return (
        await this.#calls.call(runnable, input as never, {
          ...step,
          ...(options.signal ? { signal: options.signal } : {}),
        })
      ).result;
    } catch (error) {
      // A stored failure in the same words the first time and on every replay: the loop tells the model, the
      // words go into the next turn's prompt, and a resumed loop's prompt must be the recorded one. A read's or
      // a write's failure is told as it is: the model may call it again, which is safe by its kind.
      if (error instanceof ReplayedFailureError) throw new CallFailedError(error.key, toolName, error.stored);
      // Any other failure of an effect leaves its step unsettled: the model must not hear of it (below).
      if (declared.kind === "effect" && !(error instanceof CallFailedError))
        this.#unsettled.set(toolCallId, { tool: toolName, error });
      throw error;
    }
  }

  #accepts(call: TurnToolCall): boolean {
    return this.#tools.get(call.toolName)?.input.safeParse(call.input).success === true;
  }
}

/**
 * A tool as a recorded step: an effect tool as it is; a read or write tool as one whose result is stored under
 * its step (and run again if its owner died), so a resumed loop calling that step sees the answer it saw.
 * AgentTask's own tools run this way, and so do an MCP server's calls that name their step (`@once/mcp`).
 */
export function journal(declared: AnyTool): AnyTool {
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

/** A once tool, not a framework's tool or anything else: it must have a kind and zod schemas. */
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
