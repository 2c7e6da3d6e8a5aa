import { OnceError, StoreUnavailableError } from "@once/core";
import { PostgresConfigError, PostgresQueryError } from "./errors.js";

// SQLSTATE classes and codes that mean "the database cannot take this right now", not "the statement is
// wrong": connection exceptions, insufficient resources, operator intervention (shutdown, crash recovery,
// idle-session timeouts), serialization failures and deadlocks, a read-only transaction after a failover, a
// session ended for sitting idle in its transaction (the timeout a transactional effect sets from its lease),
// a lock not available, a query cancelled by a timeout.
const UNAVAILABLE_CLASSES = ["08", "53", "57", "40"];
const UNAVAILABLE_CODES = ["25006", "25P03", "55P03", "57014"];

/**
 * Sorts an error from a store call. Anything between us and a working PostgreSQL (a refused or cut
 * connection, a timeout, a server shutting down or recovering, a serialization failure) becomes
 * {@link StoreUnavailableError}: once fails closed and runs nothing. Any other error from the server is a
 * bug and says so; a missing privilege names the grant.
 */
export function toStoreError(operation: string, error: unknown): Error {
  if (OnceError.is(error)) return error;
  const sqlState = (error as { code?: unknown } | null)?.code;
  const fromServer = typeof sqlState === "string" && /^[0-9A-Z]{5}$/.test(sqlState);
  if (fromServer) {
    if (UNAVAILABLE_CLASSES.includes(sqlState.slice(0, 2)) || UNAVAILABLE_CODES.includes(sqlState))
      return new StoreUnavailableError(operation, { cause: error });
    if (sqlState === "42501")
      return new PostgresConfigError(
        "privileges",
        `the PostgreSQL role may not run ${operation} (${(error as Error).message}): grant it USAGE on the store's schema and EXECUTE on its functions`,
        { cause: error },
      );
    return new PostgresQueryError(operation, (error as Error).message, { cause: error });
  }
  // Errors thrown by our own code are bugs, not outages: let them through as they are.
  if (error instanceof TypeError || error instanceof RangeError) return error;
  return new StoreUnavailableError(operation, { cause: error });
}
