import { OnceError, StoreUnavailableError } from "@once/core";
import { ReplyError } from "ioredis";
import { RedisConfigError, RedisScriptError } from "./errors.js";

// Error replies that mean "Redis cannot take this right now", not "the script is wrong": loading a
// dataset, a busy script, a failover or resharding in progress, a failing disk, a full memory.
const UNAVAILABLE_REPLIES = [
  "LOADING",
  "BUSY",
  "MASTERDOWN",
  "CLUSTERDOWN",
  "TRYAGAIN",
  "READONLY",
  "NOREPLICAS",
  "MISCONF",
  "OOM",
];

/**
 * Sorts an error from a store call. Anything between us and a working Redis (a refused or closed
 * connection, a timeout, ioredis giving up its retries, an unavailable reply) becomes
 * {@link StoreUnavailableError}: once fails closed and runs nothing. Any other error reply is a bug and
 * says so.
 */
export function toStoreError(operation: string, error: unknown): Error {
  if (OnceError.is(error)) return error;
  if (error instanceof ReplyError) {
    const message = (error as Error).message;
    const prefix = message.split(" ", 1)[0] ?? "";
    if (UNAVAILABLE_REPLIES.includes(prefix)) return new StoreUnavailableError(operation, { cause: error });
    if (prefix === "NOPERM") {
      return new RedisConfigError(
        "acl",
        `the Redis user may not run ${operation} (${message}): grant it EVAL, EVALSHA and the keys under once's prefix`,
        { cause: error },
      );
    }
    return new RedisScriptError(operation, message, { cause: error });
  }
  // Errors thrown by our own code are bugs, not outages: let them through as they are.
  if (error instanceof TypeError || error instanceof RangeError) return error;
  return new StoreUnavailableError(operation, { cause: error });
}
