import { PostgresConfigError } from "./errors.js";

/** A lower-case SQL identifier: what `schema` may be, and `tablePrefix` once it is followed by a name. */
const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;
const PREFIX = /^[a-z_][a-z0-9_]*$|^$/;
/** PostgreSQL cuts identifiers at 63 bytes; the longest name once adds after the prefix is this long. */
const LONGEST_SUFFIX = "resolve_not_applied".length;

/** Where a store's objects live: `"<schema>"."<tablePrefix>records"` and its functions. */
export interface Names {
  schema: string;
  tablePrefix: string;
  /** The quoted schema, safe to put into SQL. */
  qSchema: string;
  /** `"<schema>"."<tablePrefix><name>"`, safe to put into SQL. */
  q(name: string): string;
  /** The key of the advisory lock migrations of this schema and prefix take. */
  lockKey: string;
}

/**
 * Checks `schema` and `tablePrefix` (names cannot be bind parameters, so they are checked, then quoted): a
 * lower-case identifier of at most 63 bytes, and a prefix that keeps every name within that.
 */
export function namesFor(schema: string, tablePrefix: string): Names {
  if (typeof schema !== "string" || !IDENTIFIER.test(schema) || schema.length > 63)
    throw new PostgresConfigError(
      "schema",
      `schema ${JSON.stringify(schema)} is not an identifier: use lower-case letters, digits and _, starting with a letter or _, at most 63 characters`,
    );
  if (
    typeof tablePrefix !== "string" ||
    !PREFIX.test(tablePrefix) ||
    tablePrefix.length + LONGEST_SUFFIX > 63
  )
    throw new PostgresConfigError(
      "tablePrefix",
      `tablePrefix ${JSON.stringify(tablePrefix)} is not an identifier prefix: use lower-case letters, digits and _, starting with a letter or _, at most ${63 - LONGEST_SUFFIX} characters`,
    );
  const qSchema = `"${schema}"`;
  return {
    schema,
    tablePrefix,
    qSchema,
    q: (name) => `${qSchema}."${tablePrefix}${name}"`,
    lockKey: `once:${schema}.${tablePrefix}`,
  };
}
