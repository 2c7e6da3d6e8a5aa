import { OnceError } from "@once/core";

/** The codes of @once/postgres's errors: stable, safe to match on. */
export type PostgresErrorCode =
  | "ONCE_POSTGRES_CONFIG"
  | "ONCE_POSTGRES_VERSION"
  | "ONCE_POSTGRES_SCHEMA"
  | "ONCE_POSTGRES_QUERY";

/**
 * The PostgreSQL behind the store, or the options it was given, would break the protocol: a schema name that
 * is not an identifier, a read-only standby, a role that may not create the store's objects. `setting` names
 * what to change; the message says how.
 */
export class PostgresConfigError extends OnceError<"ONCE_POSTGRES_CONFIG"> {
  constructor(
    readonly setting: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super("ONCE_POSTGRES_CONFIG", message, options);
  }
}

/** The server is older than the oldest PostgreSQL the store supports. */
export class PostgresVersionError extends OnceError<"ONCE_POSTGRES_VERSION"> {
  constructor(
    /** `server_version` as the server reports it, e.g. `12.19`. */
    readonly serverVersion: string,
    /** The oldest supported major version. */
    readonly minimumMajor: number,
  ) {
    super(
      "ONCE_POSTGRES_VERSION",
      `PostgreSQL ${serverVersion} is older than ${minimumMajor}, the oldest version @once/postgres supports: upgrade the server`,
    );
  }
}

/**
 * The store's schema in the database is not one this build can use: migrated by a newer @once/postgres, or
 * not migrated and `migrate: false`.
 */
export class PostgresSchemaError extends OnceError<"ONCE_POSTGRES_SCHEMA"> {
  constructor(
    readonly schema: string,
    /** The version the database is at (0: none). */
    readonly databaseVersion: number,
    /** The version this build knows. */
    readonly knownVersion: number,
    message: string,
  ) {
    super("ONCE_POSTGRES_SCHEMA", message);
  }
}

/**
 * PostgreSQL rejected one of the store's statements for a reason other than being unavailable. That is a bug
 * in @once/postgres (or a record it did not write), never an outcome to retry.
 */
export class PostgresQueryError extends OnceError<"ONCE_POSTGRES_QUERY"> {
  constructor(
    readonly transition: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(
      "ONCE_POSTGRES_QUERY",
      `PostgreSQL rejected the ${transition} transition: ${reason}. This is a bug in @once/postgres or a record it did not write`,
      options,
    );
  }
}
