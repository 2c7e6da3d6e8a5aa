import { OnceError } from "@once/core";

/** The codes of @once/redis's errors: stable, safe to match on. */
export type RedisErrorCode = "ONCE_REDIS_CONFIG" | "ONCE_REDIS_SCRIPT";

/**
 * The Redis behind the store is set up in a way that can lose records or break the protocol (an evicting
 * `maxmemory-policy`, a version older than 6.2, a read-only replica, a cluster node reached without a
 * Cluster client, an ACL that forbids scripts). `setting` names what to change; the message says how.
 */
export class RedisConfigError extends OnceError<"ONCE_REDIS_CONFIG"> {
  constructor(
    readonly setting: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super("ONCE_REDIS_CONFIG", message, options);
  }
}

/**
 * Redis rejected one of once's scripts for a reason other than being unavailable. That is a bug in
 * @once/redis (or a record written by something else), never an outcome to retry.
 */
export class RedisScriptError extends OnceError<"ONCE_REDIS_SCRIPT"> {
  constructor(
    readonly script: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(
      "ONCE_REDIS_SCRIPT",
      `Redis rejected the ${script} script: ${reason}. This is a bug in @once/redis or a record it did not write`,
      options,
    );
  }
}
