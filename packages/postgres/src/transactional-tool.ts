import { defineTool, type EffectContext, type Tool, type ToolSpec } from "@once/core";
import type { PoolClient } from "pg";
import type { z } from "zod";

/** What a transactional tool's `run` is handed: the effect context and the open transaction. */
export interface TransactionContext extends EffectContext {
  /** The transaction the record's `done` commits in: write the effect with it, and only with it. */
  transaction: PoolClient;
}

/** A tool whose effect is a write to the PostgresStore's own database. */
export interface TransactionalToolSpec<
  Name extends string,
  In extends z.ZodType,
  Out extends z.ZodType,
  Prepared,
> extends Omit<ToolSpec<Name, "effect", In, Out, Prepared>, "kind" | "run" | "reconcile" | "transactional"> {
  /**
   * The database the effect writes to. When set, a worker whose store keeps its records in another database
   * refuses to start (TransactionStoreError): one transaction cannot span two databases.
   */
  database?: string;
  /**
   * The effect, written with `ctx.transaction` (never another connection: only what it writes commits with the
   * record). Return the result; it is stored in the same transaction. Throwing rolls everything back.
   */
  run: (
    input: z.output<In>,
    ctx: TransactionContext,
    prepared: Prepared,
  ) => Promise<z.input<Out>> | z.input<Out>;
}

/**
 * Declares an effect tool whose effect and record commit in one transaction of the PostgresStore's database
 * (`defineTool({ kind: "effect", transactional: true, … })`, with `ctx.transaction` typed as a `pg`
 * `PoolClient`). A crash anywhere rolls both back: a retry finds nothing and runs again, or finds `done` and
 * replays. Exactly once, with no reconcile hook; a failure of `run` is never `unknown`.
 */
export function transactionalTool<
  const Name extends string,
  In extends z.ZodType,
  Out extends z.ZodType,
  Prepared = undefined,
>(spec: TransactionalToolSpec<Name, In, Out, Prepared>): Tool<Name, "effect", In, Out, Prepared> {
  const { database, run, ...rest } = spec;
  return defineTool<Name, "effect", In, Out, Prepared>({
    ...rest,
    kind: "effect",
    transactional: database === undefined ? true : { database },
    run: (input, ctx, prepared) => run(input, ctx as TransactionContext, prepared),
  });
}
