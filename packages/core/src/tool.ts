import type { z } from "zod";
import {
  ApprovalStoreError,
  InvalidInputError,
  InvalidOutputError,
  InvalidToolError,
  type StoredError,
  TransactionStoreError,
} from "./errors.js";
import { isApprovalStore, isTransactionalStore, type OnceStore } from "./store.js";

/**
 * `read`: no side effect, retry freely. `write`: idempotent by nature (set_status), retry freely.
 * `effect`: every repeat is a new real-world effect (charge, email, ticket); only these go through the store.
 */
export type ToolKind = "read" | "write" | "effect";

/** How `classifyError` sorts a failure of `run`. */
export type ErrorClass = "terminal" | "not_applied" | "unknown";

/** What a reconcile hook found out about an effect whose outcome was lost. */
export type ReconcileResult<Out> = { applied: true; result: Out } | { applied: false };

/** What every tool is handed. */
export interface CallContext {
  tool: string;
  namespace: string;
  taskId?: string;
  stepId?: string;
  /** 1 for the first delivery of the job. */
  attempt: number;
  /** Aborts when the call must stop: for effect tools, when the lease is lost. */
  signal: AbortSignal;
}

/** What an effect tool is handed: the key and fence to pass downstream (e.g. as `Idempotency-Key`). */
export interface EffectContext extends CallContext {
  taskId: string;
  stepId: string;
  key: string;
  fence: number;
  /**
   * Resolves when this owner still holds the key with at least half its lease ahead; rejects with
   * `LeaseLostError` when it does not. Call it right before a request leaves for the provider (`fetchWithKey`
   * does): an owner that was frozen past its lease finds out here, on the local monotonic clock and with a
   * heartbeat, instead of from the first heartbeat after its request has left.
   */
  assertLease(): Promise<void>;
  /**
   * Transactional tools only: the open transaction of the store's database. Write the effect with it; the
   * record's `done` commits in the same transaction, so the effect and its record commit together or not at
   * all. Its type is the store's (for `@once/postgres`, a `pg.PoolClient`; see its `transactionalTool`).
   */
  transaction?: unknown;
}

/** What an approval policy is handed with the validated input: the call it is asked about. */
export interface ApprovalContext {
  tool: string;
  namespace: string;
  taskId: string;
  stepId: string;
  key: string;
}

/**
 * When an effect call needs a person's yes before it runs: `true` for every call, or a function of the
 * validated input that returns the reason (e.g. "amount 250 is over 100") when it does, and nothing when not.
 */
export type ApprovalPolicy<Input> =
  | true
  | ((input: Input, ctx: ApprovalContext) => string | undefined | null | Promise<string | undefined | null>);

export type ContextFor<K extends ToolKind> = K extends "effect" ? EffectContext : CallContext;

export interface ToolSpec<
  Name extends string,
  Kind extends ToolKind,
  In extends z.ZodType,
  Out extends z.ZodType,
  Prepared = undefined,
> {
  name: Name;
  kind: Kind;
  description?: string;
  input: In;
  output: Out;
  /** Validation and look-ups before any side effect. A crash here costs a takeover, not a reconcile. */
  prepare?: (input: z.output<In>, ctx: ContextFor<Kind>) => Promise<Prepared> | Prepared;
  /** The call itself. */
  run: (
    input: z.output<In>,
    ctx: ContextFor<Kind>,
    prepared: Prepared,
  ) => Promise<z.input<Out>> | z.input<Out>;
  /** Asks the outside world whether the effect for `ctx.key` happened (a provider lookup). Effect tools only. */
  reconcile?: (input: z.output<In>, ctx: EffectContext) => Promise<ReconcileResult<z.input<Out>>>;
  /** Sorts a failure of `run`. Default: `unknown` (the effect may have happened). */
  classifyError?: (error: unknown) => ErrorClass;
  /** Lease for effect calls; heartbeats renew it every third of it. Default: the worker's. */
  leaseMs?: number;
  /**
   * Effect tools only: the effect is a write to the store's own database, made with `ctx.transaction`, and
   * commits in one transaction with the record's `done`. A crash anywhere rolls both back, so a retry finds
   * no effect (and runs it again) or `done` (and replays): exactly once, no reconcile hook needed, and a
   * failure of `run` is never `unknown`. Needs a store with transactions (@once/postgres); `{ database }`
   * names the database the effect writes to, and a store whose records are elsewhere is refused at start.
   */
  transactional?: true | { database: string };
  /**
   * Effect tools only: a person must approve the call before its effect runs (docs/approvals.md). The call is
   * claimed, recorded as awaiting approval with the policy's reason, and answered `ApprovalPendingError` until
   * it is approved (then the next claim runs it once), denied or expired (then it fails for good).
   */
  approval?: ApprovalPolicy<z.output<In>>;
}

export interface Tool<
  Name extends string = string,
  Kind extends ToolKind = ToolKind,
  In extends z.ZodType = z.ZodType,
  Out extends z.ZodType = z.ZodType,
  Prepared = unknown,
> extends Readonly<ToolSpec<Name, Kind, In, Out, Prepared>> {}

// biome-ignore lint/suspicious/noExplicitAny: a registry holds tools of every input and output type.
export type AnyTool = Tool<string, ToolKind, z.ZodType, z.ZodType, any>;

export type InputOf<T extends AnyTool> = z.input<T["input"]>;
export type OutputOf<T extends AnyTool> = z.output<T["output"]>;

/** The lease of an effect call's owner when neither the tool nor the worker sets one. */
export const DEFAULT_LEASE_MS = 30_000;

/** The shortest lease an owner may ask for: heartbeats every third of it must still be able to keep up. */
export const MIN_LEASE_MS = 100;

/** True for a lease every store and entry point accepts: an integer of at least {@link MIN_LEASE_MS}. */
export function isLeaseMs(value: unknown): value is number {
  return Number.isInteger(value) && (value as number) >= MIN_LEASE_MS;
}

const TOOL_NAME = /^[A-Za-z][A-Za-z0-9_.-]{0,127}$/;
const KINDS: readonly ToolKind[] = ["read", "write", "effect"];

/** Declares a tool; checks the declaration now so a mistake fails at start-up, not on the first call. */
export function defineTool<
  const Name extends string,
  const Kind extends ToolKind,
  In extends z.ZodType,
  Out extends z.ZodType,
  Prepared = undefined,
>(spec: ToolSpec<Name, Kind, In, Out, Prepared>): Tool<Name, Kind, In, Out, Prepared> {
  const name = String(spec.name);
  if (!TOOL_NAME.test(name)) {
    throw new InvalidToolError(name, "name must start with a letter and use letters, digits, _ . - (≤128)");
  }
  if (!KINDS.includes(spec.kind)) throw new InvalidToolError(name, `kind must be one of ${KINDS.join(", ")}`);
  if (typeof spec.input?.safeParse !== "function" || typeof spec.output?.safeParse !== "function") {
    throw new InvalidToolError(name, "input and output must be zod schemas");
  }
  if (typeof spec.run !== "function") throw new InvalidToolError(name, "run must be a function");
  if (spec.kind !== "effect" && (spec.reconcile || spec.prepare)) {
    throw new InvalidToolError(name, "prepare and reconcile are for effect tools only");
  }
  if (spec.transactional !== undefined) {
    if (spec.kind !== "effect") throw new InvalidToolError(name, "transactional is for effect tools only");
    if (spec.reconcile)
      throw new InvalidToolError(
        name,
        "a transactional tool needs no reconcile hook: its effect commits with its record, or not at all",
      );
    const database = spec.transactional === true ? "" : spec.transactional?.database;
    if (spec.transactional !== true && (typeof database !== "string" || database === ""))
      throw new InvalidToolError(name, "transactional must be true or { database: <the database's name> }");
  }
  if (spec.approval !== undefined) {
    if (spec.kind !== "effect")
      throw new InvalidToolError(
        name,
        "approval is for effect tools only: a read or write call is retried freely, there is nothing to approve",
      );
    if (spec.approval !== true && typeof spec.approval !== "function")
      throw new InvalidToolError(name, "approval must be true or a function of the input returning a reason");
  }
  if (spec.leaseMs !== undefined && !isLeaseMs(spec.leaseMs)) {
    throw new InvalidToolError(name, `leaseMs must be an integer of at least ${MIN_LEASE_MS}`);
  }
  return Object.freeze({ ...spec });
}

/** Parses `input` with the tool's schema; throws {@link InvalidInputError} listing paths, never values. */
export function parseInput<T extends AnyTool>(tool: T, input: unknown): z.output<T["input"]> {
  const parsed = tool.input.safeParse(input);
  if (!parsed.success)
    throw new InvalidInputError(tool.name, describeIssues(parsed.error), { cause: parsed.error });
  return parsed.data as never;
}

/** Parses a tool's output; throws {@link InvalidOutputError}. */
export function parseOutput<T extends AnyTool>(tool: T, output: unknown): z.output<T["output"]> {
  const parsed = tool.output.safeParse(output);
  if (!parsed.success)
    throw new InvalidOutputError(tool.name, describeIssues(parsed.error), { cause: parsed.error });
  return parsed.data as never;
}

/** `path: message` for each issue; zod's messages name expectations, not the offending values. */
export function describeIssues(error: z.ZodError): string[] {
  return error.issues.map(
    (issue) => `${issue.path.length ? issue.path.join(".") : "(root)"}: ${issue.message}`,
  );
}

/** The default classification: anything unrecognised may have reached the outside world. */
export function classifyWith(tool: AnyTool, error: unknown): ErrorClass {
  if (!tool.classifyError) return "unknown";
  try {
    const verdict = tool.classifyError(error);
    return verdict === "terminal" || verdict === "not_applied" ? verdict : "unknown";
  } catch {
    return "unknown";
  }
}

/** The storable form of an error: its name, message and code, nothing else. */
export function toStoredError(error: unknown): StoredError {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return { name: error.name, message: error.message, ...(typeof code === "string" ? { code } : {}) };
  }
  return { name: "Error", message: String(error) };
}

/**
 * Refuses, at start, a transactional tool that `store` cannot run: one without transactions (Redis, memory),
 * or one whose records are in another database than the tool writes to.
 */
export function assertTransactionalTools(tools: readonly AnyTool[], store: OnceStore): void {
  for (const tool of tools) {
    if (tool.kind !== "effect" || tool.transactional === undefined) continue;
    const storeName = (store as object).constructor?.name ?? "the store";
    if (!isTransactionalStore(store))
      throw new TransactionStoreError(
        tool.name,
        `its effect commits with its record in one transaction of the store's database, and ${storeName} has no transactions: use a store on that database (@once/postgres's PostgresStore)`,
      );
    const wanted = tool.transactional === true ? undefined : tool.transactional.database;
    if (wanted !== undefined && wanted !== store.database)
      throw new TransactionStoreError(
        tool.name,
        `it writes to database ${JSON.stringify(wanted)}, and ${storeName} keeps its records in ${JSON.stringify(store.database)}: one transaction cannot span two databases`,
      );
  }
}

/** Refuses, at start, a tool with an approval policy on a store that keeps no approval requests. */
export function assertApprovalTools(tools: readonly AnyTool[], store: OnceStore): void {
  for (const tool of tools) {
    if (tool.kind !== "effect" || tool.approval === undefined || isApprovalStore(store)) continue;
    throw new ApprovalStoreError(tool.name, (store as object).constructor?.name ?? "the store");
  }
}
