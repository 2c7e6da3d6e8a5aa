import { RecordLayoutError } from "@once/core";

/**
 * The newest row layout this build reads: how a row's columns hold a record. Every row says its own in the
 * `layout` column (schema version 2 on; rows from before are at 1, the column's default). The functions
 * that write rows are the schema's, always the newest build's, so only what reads rows needs this: `get`,
 * the scan, and a claim's replay. Layout 2 (schema version 3) is a row that has had an approval request: its
 * `apr_*` columns and the states `awaiting_approval` and `approved`. Layout 3 (schema version 4) is a row a task's
 * cancel reached: the state `cancelled`, or the `cancel_*` columns on a running effect. docs/protocol.md, "Record layouts",
 * lists the layouts and the upgrade order.
 */
export const RECORD_LAYOUT = 3;

/** Throws RecordLayoutError when a row's layout is newer than this build reads. */
export function assertReadableLayout(key: string, layout: number | null | undefined): void {
  if (typeof layout === "number" && layout > RECORD_LAYOUT)
    throw new RecordLayoutError(key, layout, RECORD_LAYOUT, "@once/postgres");
}
