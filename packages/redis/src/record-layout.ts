import { RecordLayoutError } from "@once/core";

/**
 * The newest record layout this build reads, and the one its scripts write. Layouts 1 to 5 kept a record as a
 * hash of named fields, saying its layout in a `layout` field only when that differed from 3; layout 4 added an
 * approval request, layout 5 a call's task (its identity and its task's cancellation). Layout 6 keeps a record
 * as one string, a MessagePack array that starts with the layout, its fingerprint and traceparent as bytes
 * (lua/includes/record.lua): a record of an earlier layout is read as it is and written in layout 6 by the
 * first transition that changes it. Every later layout starts its string the same way, so a reader refuses a
 * record newer than it knows before reading anything else. The scripts hold the same number (`LAYOUT` in
 * lua/includes/record.lua); a test holds the two to each other. docs/protocol.md, "Record layouts", lists the
 * layouts and the upgrade order of a change.
 */
export const RECORD_LAYOUT = 6;

// What a script answers when the record's layout is newer than it knows: `{13, layout, known}`, and the
// record's key after them when it is not the script's first key (read-task). Not an outcome: the call fails,
// so it is told apart before the reply is read as one.
const NEWER_LAYOUT = 13;

/** Throws RecordLayoutError when a script refused a record for its layout; otherwise does nothing. */
export function refuseNewerLayout(key: string, reply: unknown): void {
  if (!Array.isArray(reply) || reply[0] !== NEWER_LAYOUT) return;
  const named = typeof reply[3] === "string" ? reply[3] : key;
  throw new RecordLayoutError(named, Number(reply[1]), Number(reply[2]), "@once/redis");
}
