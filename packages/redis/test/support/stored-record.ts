// A record as Redis keeps it, for the tests that hold the stored form to its documentation
// (lua/includes/record.lua): layout 6 is one string, a MessagePack array of the layout and then the fields in
// the order below, unpacked here by Redis' own cmsgpack. The order and the codes are written out again on
// purpose: a change to the layout must change this file too.

import type { Cluster, Redis } from "ioredis";

const FIELDS = [
  "state",
  "fence",
  "claims",
  "created_at",
  "updated_at",
  "fp",
  "tool",
  "result",
  "error",
  "trace",
  "ns",
  "task_id",
  "step_id",
  "phase",
  "owner",
  "lease_until",
  "live",
  "apr_as",
  "apr_reason",
  "apr_at",
  "apr_until",
  "apr_by",
  "apr_why",
  "apr_decided",
  "res_as",
  "res_by",
  "res_why",
  "res_at",
  "cancel_by",
  "cancel_why",
  "cancel_at",
] as const;
const STATES = [
  "claimed",
  "reconciling",
  "unknown",
  "released",
  "done",
  "failed",
  "awaiting_approval",
  "approved",
  "cancelled",
];
const PHASES = ["prepare", "effect"];
/** The fields kept as bytes: shown as hex. */
const BYTES = new Set(["fp", "trace"]);

const UNPACK = `
local raw = redis.call('GET', KEYS[1])
if not raw then return false end
return cmsgpack.unpack(raw)`;

export interface StoredRecord {
  layout: number;
  /** Every field present, by name: numbers as numbers, fp and trace as hex, the rest as text. */
  fields: Record<string, string | number>;
  /** The string's length in bytes. */
  bytes: number;
}

/** The record at `fullKey` (prefix included) as it is kept, or undefined when there is none. */
export async function storedRecord(
  redis: Redis | Cluster,
  fullKey: string,
): Promise<StoredRecord | undefined> {
  const array = (await redis.callBuffer("EVAL", UNPACK, 1, fullKey)) as unknown[] | null;
  if (array === null) return undefined;
  const [layout, ...values] = array;
  const fields: Record<string, string | number> = {};
  values.forEach((value, i) => {
    const name = FIELDS[i];
    if (name === undefined || value === null) return;
    if (typeof value === "number")
      fields[name] =
        name === "state" ? String(STATES[value - 1]) : name === "phase" ? String(PHASES[value - 1]) : value;
    else
      fields[name] = BYTES.has(name) ? (value as Buffer).toString("hex") : (value as Buffer).toString("utf8");
  });
  return { layout: Number(layout), fields, bytes: Number(await redis.strlen(fullKey)) };
}

/** Writes a record of layout `layout` at `fullKey` as a later build would: its string starts with the layout. */
export async function writeLaterRecord(
  redis: Redis | Cluster,
  fullKey: string,
  layout: number,
): Promise<void> {
  await redis.eval(
    "redis.call('SET', KEYS[1], cmsgpack.pack({tonumber(ARGV[1]), 'a field this build cannot read'}), 'PX', 60000)",
    1,
    fullKey,
    layout,
  );
}
