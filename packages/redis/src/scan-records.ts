import { OnceError, type OnceRecord } from "@once/core";
import { positiveInteger } from "@once/core/store-kit";
import type { Cluster, Redis } from "ioredis";
import { isLivenessEntry } from "./liveness-entry.js";
import { type ScriptFile, scriptFiles } from "./load-scripts.js";
import { replyText } from "./record-bytes.js";
import { refuseNewerLayout } from "./record-layout.js";
import { isTaskEntry } from "./task-entry.js";
import { toRecord } from "./to-record.js";

export interface ScanRecordsOptions {
  /** The store's key prefix. Default `"once:"`. */
  prefix?: string;
  /** SCAN's COUNT hint: keys looked at per round trip on each server. Default 250. */
  batchSize?: number;
  /**
   * Told about each key under the prefix that is not a once record (another type, a hash without a known
   * state) or could not be read. Such keys are skipped either way. A record of a layout newer than this build
   * reads is not skipped: the scan fails with RecordLayoutError.
   */
  onSkipped?: (key: string, reason: string) => void;
}

/** One SCAN reply's worth of records, and where the scan goes on after it. */
export interface RecordBatch {
  records: OnceRecord[];
  /** Keys SCAN returned in this batch (records and skipped keys; tasks' entries are neither, and not counted). */
  keys: number;
  /** Pass it as `cursor` to go on after this batch; undefined when the scan is complete. */
  cursor: string | undefined;
}

/**
 * Every record under `prefix` (tasks' entries passed over), read with SCAN and a cursor (never KEYS) on a standalone server, or on
 * every master of a Cluster in turn; each batch of keys is read back in one pipelined round trip. SCAN's
 * guarantees apply: a record that exists for the whole scan is yielded at least once (rarely twice, when
 * Redis rehashes meanwhile); one created or deleted during the scan may or may not be. Stop early by
 * leaving the loop. Reads only; never changes a record.
 */
export async function* scanRecords(
  redis: Redis | Cluster,
  options: ScanRecordsOptions = {},
): AsyncGenerator<OnceRecord, void, undefined> {
  for await (const batch of scanRecordBatches(redis, options)) yield* batch.records;
}

/**
 * The same scan, batch by batch, each with a cursor to resume after it (`options.cursor`): a page of
 * records that a later request continues, as the console's list does. A cursor names the master it was
 * on, so a Cluster whose masters changed refuses it (RangeError) rather than skip or repeat a node.
 */
export async function* scanRecordBatches(
  redis: Redis | Cluster,
  options: ScanRecordsOptions & { cursor?: string } = {},
): AsyncGenerator<RecordBatch, void, undefined> {
  const prefix = options.prefix ?? "once:";
  if (prefix === "") throw new RangeError("scanRecords needs a non-empty prefix");
  const batchSize = options.batchSize ?? 250;
  positiveInteger("batchSize", batchSize);
  const pattern = `${escapeGlob(prefix)}*`;
  const nodes = redis.isCluster
    ? (redis as Cluster)
        .nodes("master")
        .map((node) => ({ node, address: addressOf(node) }))
        .sort((a, b) => a.address.localeCompare(b.address))
    : [{ node: redis as Redis, address: "" }];
  let start = 0;
  let cursor = "0";
  if (options.cursor !== undefined) {
    const resumed = parseCursor(options.cursor);
    start = nodes.findIndex((n) => n.address === resumed.address);
    if (start < 0) throw new RangeError("the scan's cursor names a server that is not a master now");
    cursor = resumed.cursor;
  }
  // Each key is read through the get script, as store.get() reads it: a record of any layout this build
  // reads, in one form. It is loaded on each node first, so the pipelines' EVALSHAs find it.
  const get = await getScript();
  for (let i = start; i < nodes.length; i++) {
    const { node, address } = nodes[i] as { node: Redis; address: string };
    await node.script("LOAD", get.lua);
    do {
      const [next, scanned] = await node.scan(cursor, "MATCH", pattern, "COUNT", batchSize);
      cursor = next;
      // A task's entry (its cancellation and filed keys) and a process's liveness entry live beside the records
      // and are not among them.
      const keys = scanned.filter((key) => !isTaskEntry(key, prefix) && !isLivenessEntry(key, prefix));
      const records = [];
      if (keys.length > 0) {
        for await (const record of readBatch(redis, get, node, keys, prefix, options.onSkipped))
          records.push(record);
      }
      const following = nodes[i + 1];
      const resume =
        cursor !== "0"
          ? formatCursor(address, cursor)
          : following === undefined
            ? undefined
            : formatCursor(following.address, "0");
      yield { records, keys: keys.length, cursor: resume };
    } while (cursor !== "0");
  }
}

function addressOf(node: Redis): string {
  return `${node.options.host ?? "127.0.0.1"}:${node.options.port ?? 6379}`;
}

/** Opaque to callers: the master's address (empty on a standalone server) and SCAN's own cursor. */
function formatCursor(address: string, cursor: string): string {
  return address === "" ? cursor : `${address}/${cursor}`;
}

function parseCursor(text: string): { address: string; cursor: string } {
  const slash = text.lastIndexOf("/");
  const address = slash < 0 ? "" : text.slice(0, slash);
  const cursor = text.slice(slash + 1);
  if (!/^\d+$/.test(cursor)) throw new RangeError(`${JSON.stringify(text)} is not a scan cursor`);
  return { address, cursor };
}

async function* readBatch(
  redis: Redis | Cluster,
  get: ScriptFile,
  node: Redis,
  keys: readonly string[],
  prefix: string,
  onSkipped: ScanRecordsOptions["onSkipped"],
): AsyncGenerator<OnceRecord, void, undefined> {
  const pipeline = node.pipeline();
  for (const key of keys) pipeline.callBuffer("EVALSHA", get.sha1, 1, key);
  const replies = (await pipeline.exec()) ?? [];
  for (const [i, key] of keys.entries()) {
    let [error, reply] = replies[i] ?? [new Error("no reply"), undefined];
    if (error) {
      // A slot that moved to another master while we scanned: read the key where the Cluster says it is.
      if (!redis.isCluster || !/^(MOVED|ASK) /.test(error.message)) {
        onSkipped?.(key, error.message);
        continue;
      }
      try {
        reply = await redis.callBuffer("EVAL", get.lua, 1, key);
      } catch (retryError) {
        onSkipped?.(key, (retryError as Error).message);
        continue;
      }
    }
    const record = decode(key, prefix, replyText("get", reply), onSkipped);
    if (record !== undefined) yield record;
  }
}

async function getScript(): Promise<ScriptFile> {
  const file = (await scriptFiles()).find((script) => script.name === "get");
  if (file === undefined) throw new Error("no get script in this build");
  return file;
}

function decode(
  key: string,
  prefix: string,
  reply: unknown,
  onSkipped: ScanRecordsOptions["onSkipped"],
): OnceRecord | undefined {
  const name = key.slice(prefix.length);
  try {
    refuseNewerLayout(name, reply);
    return toRecord(name, reply);
  } catch (error) {
    // A record of a newer layout is a once record this build cannot read: skipped, it would be left out of a
    // list or a count unseen. The scan fails instead, saying to upgrade.
    if (OnceError.is(error, "ONCE_RECORD_LAYOUT")) throw error;
    onSkipped?.(key, (error as Error).message);
    return undefined;
  }
}

/** Escapes glob metacharacters so SCAN MATCH takes the prefix literally. */
function escapeGlob(value: string): string {
  return value.replace(/[*?[\]\\]/g, "\\$&");
}
