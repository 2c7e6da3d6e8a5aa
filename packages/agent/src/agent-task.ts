import {
  type AnyTool,
  ApprovalPendingError,
  CallFailedError,
  DEFAULT_NAMESPACE,
  defineTool,
  deriveKey,
  IdempotencyConflictError,
  InvalidKeyPartError,
  InvalidToolError,
  isTaskStore,
  OnceError,
  type OnceRecord,
  type OnceStore,
  ReplayedFailureError,
  type TaskCancelledError,
  validateKeyPart,
} from "@once/core";
import { type EffectDispatcher, InProcess } from "@once/engine";
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
  dispatcher?: EffectDispatcher;
  /** Lease of a model turn's owner: how long a crashed model call holds its turn before it is asked again. Default 30 s. */
  turnLeaseMs?: number;
  /** Lease of a tool call's owner, unless the tool sets its own. Default 30 s. */
  leaseMs?: number;
  /** Largest model response or tool result stored, in bytes of JSON. Default 1 MiB: a larger one is refused, never truncated. */
  maxResultBytes?: number;
  /**
   * How long a crashed loop may take to be resumed with the same `taskId`. The store's retention must cover it
   * (with the leases and attempts): a record that expires before the resume lets the resumed loop ask the
   * model again and run a recorded effect a second time, so the task refuses to start instead. Default 0.
   */
  resumeGapMs?: number;
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

/** A call's approval request, as its record holds it (docs/approvals.md). */
export interface PendingApproval {
  key: string;
  tool: string;
  /** Why the tool's policy asked for approval. */
  reason: string;
  /** When the request was made and when it expires with no decision, ms on the store's clock. */
  requestedAt: number;
  expiresAt: number;
  /** The command that approves it (`once approve <key>`; `once deny <key>` denies it). */
  approve: string;
}

/** A pending answer as the request it names. */
export function pendingApprovalOf(error: ApprovalPendingError): PendingApproval {
  const { key, tool, reason, requestedAt, expiresAt } = error;
  return { key, tool, reason, requestedAt, expiresAt, approve: `once approve ${key}` };
}

/** A request in words, for a person reading it in an agent's UI or a tool result. */
export function describeApproval(pending: PendingApproval): string {
  return (
    `${pending.tool} waits for approval: ${pending.reason} (key ${pending.key}; the request expires at ` +
    `${new Date(pending.expiresAt).toISOString()}). Nothing ran; approve with \`${pending.approve}\`, ` +
    `deny with \`once deny ${pending.key}\`, then make the same call again.`
  );
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
  readonly #dispatcher: EffectDispatcher | undefined;
  readonly #store: OnceStore;
  readonly #turnTool: AnyTool;
  readonly #turns: InProcess;
  readonly #calls: InProcess;
  /** The model calls of this run waiting for their turn's record: `run` of the turn tool picks them up. */
  readonly #asking = new Map<string, () => Promise<TurnRecord<unknown>>>();
  /** Which turn made each tool call, from the recorded turns (fresh or replayed). */
  readonly #turnOf = new Map<string, number>();
  /** Effect calls of this run that ended without a stored outcome, by call id: no further turn is asked. */
  readonly #unsettled = new Map<string, { tool: string; error: unknown }>();
  /** The approval requests the calls of this run found on their records, by call id. */
  readonly #pending = new Map<string, PendingApproval>();
  /** Set when a call of this run found the task cancelled: no further turn is asked, none of its calls runs. */
  #cancelled: TaskCancelledError | undefined;
  #nextTurn = 0;
  /**
   * The steps that were done when this run first needed the task, by key: read from the store at once (one
   * round trip where the store can), so a resume replays its recorded turns and calls without a claim each.
   */
  #done: Promise<ReadonlyMap<string, OnceRecord>> | undefined;

  constructor(options: AgentTaskOptions) {
    this.taskId = validateKeyPart("taskId", options.taskId);
    this.namespace = validateKeyPart("namespace", options.namespace ?? DEFAULT_NAMESPACE);
    for (const candidate of options.tools) {
      const declared = checkedTool(candidate);
      this.#tools.set(declared.name, declared);
      this.#journaled.set(declared.name, journal(declared));
    }
    this.#dispatcher = options.dispatcher;
    this.#store = options.store;
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
    const shared = {
      store: options.store,
      namespace: this.namespace,
      ...(options.maxResultBytes === undefined ? {} : { maxResultBytes: options.maxResultBytes }),
      ...(options.resumeGapMs === undefined ? {} : { resumeGapMs: options.resumeGapMs }),
    };
    // One attempt per turn: a failed model call is the framework's to retry, as the same turn.
    this.#turns = new InProcess({ ...shared, tools: [this.#turnTool], attempts: 1 });
    this.#calls = new InProcess({
      ...shared,
      tools: [...this.#journaled.values()],
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
    // Before anything else: a cancelled task asks the model nothing more (the store refuses the turn's claim
    // too; this spares the round trip, and outranks a call the cancel left unsettled).
    if (this.#cancelled) throw this.#cancelled;
    const [unsettled] = this.#unsettled;
    if (unsettled) {
      const [toolCallId, { tool, error }] = unsettled;
      // A call that waits for a person: the loop stops with the record's own answer, and goes on once the
      // record is approved and the call is made again.
      if (error instanceof ApprovalPendingError) throw error;
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
        ...(await this.#recordedStep(stepId)),
        ...(options.signal ? { signal: options.signal } : {}),
      });
      recorded = answer.result as TurnRecord<Response>;
    } catch (error) {
      this.#cancelled ??= cancellationIn(error);
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
    const declared = this.#declared(toolName);
    const step = this.stepOf(toolName, toolCallId);
    if (this.#cancelled) throw this.#cancelled;
    try {
      const result = await this.#run(declared, input, step, options);
      this.#unsettled.delete(toolCallId);
      this.#pending.delete(toolCallId);
      return result;
    } catch (error) {
      const cancelled = cancellationIn(error);
      this.#cancelled ??= cancelled;
      // Refused because the task was cancelled: nothing ran, and nothing of the task runs again.
      if (cancelled === error) throw error;
      // A stored failure in the same words the first time and on every replay: the loop tells the model, the
      // words go into the next turn's prompt, and a resumed loop's prompt must be the recorded one. A read's or
      // a write's failure is told as it is: the model may call it again, which is safe by its kind.
      if (error instanceof ReplayedFailureError) throw new CallFailedError(error.key, toolName, error.stored);
      if (error instanceof ApprovalPendingError) this.#pending.set(toolCallId, pendingApprovalOf(error));
      // Any other failure of an effect leaves its step unsettled: the model must not hear of it (below).
      if (declared.kind === "effect" && !(error instanceof CallFailedError))
        this.#unsettled.set(toolCallId, { tool: toolName, error });
      throw error;
    }
  }

  /**
   * Runs a tool once as a step of this task that no model turn made: a step a workflow names (`stepId`, stable
   * across runs), under the rules of a turn's tool call: an effect through the dispatcher when there is one,
   * else here; a read or write here, its result recorded. Filed under the task, so cancelling the task stops
   * it. The input is in the call's fingerprint: a resumed task that hands the step another input gets
   * `IdempotencyConflictError`. A stored failure is `CallFailedError`, the same every time.
   */
  async step(
    toolName: string,
    stepId: string,
    input: unknown,
    options: { signal?: AbortSignal } = {},
  ): Promise<unknown> {
    const declared = this.#declared(toolName);
    validateKeyPart("stepId", stepId);
    // A model turn's steps are `turn-<n>` and `turn-<n>/<call>`: a named step must not take one's key.
    if (/^turn-\d+(\/|$)/.test(stepId))
      throw new InvalidKeyPartError("stepId", `${JSON.stringify(stepId)} is the name of a model turn's step`);
    const step = { taskId: this.taskId, stepId, namespace: this.namespace };
    try {
      return await this.#run(declared, input, step, options);
    } catch (error) {
      if (error instanceof ReplayedFailureError) throw new CallFailedError(error.key, toolName, error.stored);
      throw error;
    }
  }

  /**
   * The approval request a tool call of a recorded turn waits for, as its record holds it: for a tool with an
   * approval policy whose call is not approved, denied or run yet. The first time the policy gives a reason,
   * the call is claimed and the request written (nothing of the tool runs); every time after, the record's
   * request is answered, so a crash or a second process never makes a second one. `undefined` when the call
   * needs no approval, or when its record moved on (approved, denied, expired, running, done): then the call
   * itself answers. This is what a framework's own "needs approval?" question is answered from.
   */
  async pendingApproval(
    toolName: string,
    toolCallId: string,
    input: unknown,
    options: { signal?: AbortSignal } = {},
  ): Promise<PendingApproval | undefined> {
    const declared = this.#declared(toolName);
    if (declared.kind !== "effect" || declared.approval === undefined) return undefined;
    const step = this.stepOf(toolName, toolCallId);
    const key = deriveKey(step);
    // Done when the task was loaded: the call itself replays it.
    if ((await this.#doneSteps()).has(key)) return undefined;
    const record = await this.#store.get(key);
    this.#pending.delete(toolCallId);
    if (record !== undefined && record.state !== "awaiting_approval") return undefined;
    if (record === undefined && !(await policyMayAsk(declared, input, { ...step, key }))) return undefined;
    try {
      // The claim asks the policy (again) and writes the request, or answers the one the record holds. Should
      // the policy now give no reason, the call runs here, once: its result is stored, and the call replays it.
      await this.#run(declared, input, step, options);
      return undefined;
    } catch (error) {
      if (error instanceof ApprovalPendingError) {
        const pending = pendingApprovalOf(error);
        this.#pending.set(toolCallId, pending);
        return pending;
      }
      // Expired (or decided) since it was read: the call answers with the stored failure.
      if (error instanceof ReplayedFailureError) return undefined;
      throw error;
    }
  }

  /** The approval request this run last found for a tool call (by `pendingApproval` or the call itself). */
  approvalRequestOf(toolCallId: string): PendingApproval | undefined {
    return this.#pending.get(toolCallId);
  }

  #declared(toolName: string): AnyTool {
    const declared = this.#tools.get(toolName);
    if (!declared)
      throw new InvalidToolError(toolName, `is not among the tools of task ${JSON.stringify(this.taskId)}`);
    return declared;
  }

  async #run(declared: AnyTool, input: unknown, step: TurnStep, options: { signal?: AbortSignal }) {
    const recorded = await this.#recordedStep(step.stepId);
    if (declared.kind === "effect" && this.#dispatcher)
      return (await this.#dispatcher.call(declared, input as never, { ...step, ...recorded })).result;
    const runnable = this.#journaled.get(declared.name) as AnyTool;
    return (
      await this.#calls.call(runnable, input as never, {
        ...step,
        ...recorded,
        ...(options.signal ? { signal: options.signal } : {}),
      })
    ).result;
  }

  /**
   * The calls of a saved history this run did not make (a message list or a run state, resumed in another
   * process): each is placed in the recorded turn that made it, and the next turn this run asks is the one
   * after the latest of them — the history goes on from there, as the task does. Calls no recorded turn of
   * the task made are left alone (`call` refuses them: `UnrecordedToolCallError`). An adapter whose framework
   * resumes from its own saved state calls this before a model call and before a tool call.
   */
  async continueAfter(toolCallIds: readonly string[]): Promise<void> {
    const unknown = toolCallIds.filter((id) => !this.#turnOf.has(id));
    if (unknown.length === 0) return;
    const recorded = await this.#recordedCalls();
    for (const id of unknown) {
      const turn = recorded.get(id);
      if (turn === undefined) continue;
      this.#turnOf.set(id, turn);
      this.#nextTurn = Math.max(this.#nextTurn, turn + 1);
    }
  }

  /** Which recorded turn made each call the tools accepted, from the store: turn 0 on, while they are done. */
  async #recordedCalls(): Promise<Map<string, number>> {
    const calls = new Map<string, number>();
    const done = await this.#doneSteps();
    for (let turn = 0; ; turn++) {
      const key = deriveKey({ namespace: this.namespace, taskId: this.taskId, stepId: `turn-${turn}` });
      // A turn recorded before its claims were filed under the task is not among those loaded: read on its own.
      const record = done.get(key) ?? (await this.#store.get(key));
      if (record?.state !== "done" || record.result === undefined) return calls;
      for (const id of (JSON.parse(record.result) as TurnRecord<unknown>).accepted) calls.set(id, turn);
    }
  }

  /**
   * The step's record if it was done when the task was loaded, as the option that lets its call replay it with
   * no round trip (the call still holds it to its tool and input: another one goes to the claim, a conflict).
   */
  async #recordedStep(stepId: string): Promise<{ recorded?: OnceRecord }> {
    const recorded = (await this.#doneSteps()).get(
      deriveKey({ namespace: this.namespace, taskId: this.taskId, stepId }),
    );
    return recorded === undefined ? {} : { recorded };
  }

  /** The task's done steps, read once per run (again after a failed read). */
  #doneSteps(): Promise<ReadonlyMap<string, OnceRecord>> {
    this.#done ??= this.#loadDone().catch((error: unknown) => {
      this.#done = undefined;
      throw error;
    });
    return this.#done;
  }

  async #loadDone(): Promise<ReadonlyMap<string, OnceRecord>> {
    const done = new Map<string, OnceRecord>();
    if (!isTaskStore(this.#store)) return done;
    const task = await this.#store.readTask({ namespace: this.namespace, taskId: this.taskId });
    // Every claim of a cancelled task is answered `cancelled`, a done step's too: those answers are the claims'.
    if (task.cancellation !== undefined) return done;
    for (const record of task.records) if (record.state === "done") done.set(record.key, record);
    return done;
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

/**
 * Whether an approval policy may give a reason for this call: false only when it answers nothing (or the input
 * is one the call refuses anyway). A policy that throws or answers something else may: the claim asks it again
 * and fails closed.
 */
async function policyMayAsk(
  declared: AnyTool,
  input: unknown,
  call: { namespace: string; taskId: string; stepId: string; key: string },
): Promise<boolean> {
  const policy = declared.approval;
  if (policy === undefined) return false;
  if (policy === true) return true;
  const parsed = declared.input.safeParse(input);
  if (!parsed.success) return false;
  try {
    const reason = await policy(parsed.data as never, { tool: declared.name, ...call });
    return reason !== undefined && reason !== null;
  } catch {
    return true;
  }
}

/**
 * The cancellation a failure carries: the call was refused ({@link TaskCancelledError} itself), or its tool
 * stopped for the cancel (`ctx.signal`'s reason, as the cause of what it threw).
 */
function cancellationIn(error: unknown): TaskCancelledError | undefined {
  let current = error;
  for (let depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    if (OnceError.is(current, "ONCE_TASK_CANCELLED")) return current as TaskCancelledError;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
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
