import { withTimeout } from "@once/core/store-kit";
import type { Pool, PoolClient } from "pg";
import { toStoreError } from "./to-store-error.js";

/**
 * Runs `use` on a client checked out of `pool` — one session, for statements that must share it (a
 * transaction) — and gives the client back when `use` settles. Every checkout in this package goes through
 * here.
 *
 * While the client is out it has an `error` listener. The pool drops its own on checkout, and the server can
 * end a session while no query is running on it (the idle-in-transaction timeout, `pg_terminate_backend`, a
 * shutdown): pg then emits `error` on the client, and with nobody listening that ends the process, cutting
 * off every other call in flight in it. Here it ends only this call: whatever `use` threw for it (its next
 * statement finds the client not queryable) is replaced by the error the session ended with, sorted by
 * {@link toStoreError} as `operation` — StoreUnavailableError, for the server ended it.
 *
 * A client goes back to the pool only with no transaction open: when `use` throws on a live session, a
 * `rollback` first. A session that ended, or whose rollback failed, is released as broken
 * (`release(error)`): the pool ends it and opens a new one when it needs one.
 */
export async function withClient<T>(
  pool: Pool,
  options: { operation: string; connectTimeoutMs: number },
  use: (client: PoolClient) => Promise<T>,
): Promise<T> {
  const client = await checkOut(pool, options);
  let ended: Error | undefined;
  const onError = (error: Error) => {
    // The first error is the server's reason (`57P01`, `25P03`…) when the session was idle;
    // "Connection terminated unexpectedly" follows it.
    ended ??= error;
  };
  client.on("error", onError);
  let broken: Error | undefined;
  try {
    return await use(client);
  } catch (error) {
    if (ended === undefined)
      await client.query("rollback").catch((rollbackFailed: Error) => {
        broken = rollbackFailed;
      });
    if (ended === undefined) throw error;
    // A session ended during a query answers that query with the server's reason (severity FATAL), and the
    // listener hears only "Connection terminated" after it; ended while idle, the listener hears the reason.
    throw toStoreError(options.operation, severity(error) === "FATAL" ? error : ended);
  } finally {
    // `release` puts the pool's own listener back first: the client is never without one.
    client.release(ended ?? broken);
    client.off("error", onError);
  }
}

async function checkOut(
  pool: Pool,
  options: { operation: string; connectTimeoutMs: number },
): Promise<PoolClient> {
  const connecting = pool.connect();
  try {
    return await withTimeout(connecting, options.connectTimeoutMs, "PostgreSQL");
  } catch (error) {
    // A client handed over after we stopped waiting goes straight back: nobody else would ever release it,
    // and the pool would be one connection short for good.
    connecting.then(
      (late) => late.release(),
      () => undefined,
    );
    throw toStoreError(options.operation, error);
  }
}

function severity(error: unknown): unknown {
  return (error as { severity?: unknown } | null)?.severity;
}
