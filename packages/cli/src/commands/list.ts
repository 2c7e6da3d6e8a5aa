import { RECORD_STATES, type RecordState } from "@once/core";
import { ago, leaseText } from "@once/core/internal";
import type { Command } from "../command.js";
import { formatDuration, parseDuration } from "../durations.js";
import { UsageError } from "../errors.js";
import { ExitCode } from "../exit-code.js";
import { CONNECTION_OPTIONS } from "../options.js";
import { positiveInteger } from "../positive-integer.js";
import { jsonText, recordJson } from "../record-view.js";
import { storePrefix } from "../redis-connection.js";
import { renderTable } from "../render-table.js";
import { withStore } from "../store-session.js";

const DEFAULT_LIMIT = 100;

/** `once list`: records that match, found with SCAN on every master. */
export const listCommand: Command = {
  name: "list",
  summary: "list records by state, tool and age (SCAN with a cursor on every master, never KEYS)",
  usage: ["list [--state <state>…] [--tool <name>…] [--older-than <duration>] [--limit <n>] [options]"],
  options: ["state", "tool", "older-than", "limit", ...CONNECTION_OPTIONS],
  details:
    "--state and --tool may be repeated or comma-separated. --older-than compares the time since the record's " +
    "last transition, on the server's clock. The scan stops at the first --limit matches (default " +
    `${DEFAULT_LIMIT}): they are the first SCAN found, not the oldest; the table is sorted oldest first.`,
  examples: [
    "once list --state unknown",
    "once list --state claimed,reconciling --older-than 10m",
    "once list --tool charge_card --limit 20 --json",
  ],
  async run({ io, options }) {
    const states = options.list("state");
    for (const state of states) {
      if (!RECORD_STATES.includes(state as RecordState)) {
        throw new UsageError(
          `--state ${JSON.stringify(state)} is not a state: use ${RECORD_STATES.join(", ")}`,
        );
      }
    }
    const tools = options.list("tool");
    const olderThan = option(options.string("older-than"), (t) => parseDuration("--older-than", t));
    const limit = option(options.string("limit"), (t) => positiveInteger("--limit", t)) ?? DEFAULT_LIMIT;
    const prefix = storePrefix(options);
    return withStore(options, io, async (session) => {
      // One match more than asked: whether there are more is then known without a second scan.
      const page = await session.operator.list({
        states: states as RecordState[],
        tools,
        ...(olderThan === undefined ? {} : { olderThanMs: olderThan }),
        limit: limit + 1,
      });
      const { now, skipped } = page;
      const complete = page.records.length <= limit;
      const records = page.records.slice(0, limit).sort((a, b) => a.updatedAt - b.updatedAt);

      if (options.flag("json")) {
        io.stdout.write(
          jsonText({
            ...(session.backend === "redis" ? { prefix } : { where: session.where }),
            target: session.label,
            serverTime: now,
            filters: { states, tools, ...(olderThan === undefined ? {} : { olderThanMs: olderThan }) },
            limit,
            complete,
            skippedKeys: skipped,
            records: records.map((r) => recordJson(r, now)),
          }),
        );
        return ExitCode.ok;
      }
      if (records.length > 0) {
        const rows = records.map((r) => [
          r.key,
          r.state,
          r.phase,
          String(r.fence),
          r.tool,
          ago(r.updatedAt, now),
          leaseText(r, now),
          String(r.claims),
        ]);
        io.stdout.write(
          `${renderTable(["key", "state", "phase", "fence", "tool", "updated", "lease", "claims"], rows, {
            right: [3, 7],
            maxCellWidth: 64,
          })}\n\n`,
        );
      }
      const what = describeFilters(states, tools, olderThan);
      const where = session.backend === "redis" ? `under ${JSON.stringify(prefix)}` : session.where;
      io.stdout.write(
        complete
          ? `${records.length} record${records.length === 1 ? "" : "s"}${what} ${where} (every ${session.backend === "redis" ? "key scanned" : "record read"})\n`
          : `the first ${records.length} records${what} ${session.backend === "redis" ? "SCAN" : "the scan"} found ${where}; there are more (raise --limit)\n`,
      );
      if (skipped > 0) {
        io.stdout.write(
          skipped === 1
            ? "1 key under the prefix is not a once record (skipped)\n"
            : `${skipped} keys under the prefix are not once records (skipped)\n`,
        );
      }
      return ExitCode.ok;
    });
  },
};

function describeFilters(states: string[], tools: string[], olderThan: number | undefined): string {
  const parts: string[] = [];
  if (states.length > 0) parts.push(`state ${states.join(" or ")}`);
  if (tools.length > 0) parts.push(`tool ${tools.join(" or ")}`);
  if (olderThan !== undefined) parts.push(`unchanged for ${formatDuration(olderThan)} or more`);
  return parts.length === 0 ? "" : ` (${parts.join(", ")})`;
}

function option<T>(text: string | undefined, parse: (text: string) => T): T | undefined {
  return text === undefined ? undefined : parse(text);
}
