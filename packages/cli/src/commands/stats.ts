import { RECORD_STATES } from "@once/core";
import type { Command } from "../command.js";
import { formatDuration } from "../durations.js";
import { ExitCode } from "../exit-code.js";
import { CONNECTION_OPTIONS } from "../options.js";
import { positiveInteger } from "../positive-integer.js";
import { jsonText } from "../record-view.js";
import { storePrefix } from "../redis-connection.js";
import { renderTable } from "../render-table.js";
import { withStore } from "../store-session.js";

const DEFAULT_SAMPLE = 10_000;

/** `once stats`: how many records are in each state, per tool; a sample on a large store, and it says so. */
export const statsCommand: Command = {
  name: "stats",
  summary: "count records by state and by tool (sampled on large stores, and saying so)",
  usage: ["stats [--sample <n>] [options]"],
  options: ["sample", ...CONNECTION_OPTIONS],
  details:
    `Reads records with SCAN on every master and stops after --sample keys (default ${DEFAULT_SAMPLE}). When it ` +
    'stops early it says "sampled N of ~M keys", M being DBSIZE summed over the masters (every key in the ' +
    "database, not only once's); the counts are then of the sample, which SCAN's hash order makes a fair one.",
  examples: ["once stats", "once stats --sample 100000 --json"],
  async run({ io, options }) {
    const sampleText = options.string("sample");
    const sample = sampleText === undefined ? DEFAULT_SAMPLE : positiveInteger("--sample", sampleText);
    const prefix = storePrefix(options);
    return withStore(options, io, async (session) => {
      const counts = await session.operator.count({ sample });
      const { now, byState: total, skipped, expiredLeases, oldestUnknownAt: oldestUnknown } = counts;
      const complete = !counts.sampled;
      const read = counts.records;
      const dbsize = counts.totalKeys ?? 0;
      const tools = Object.entries(counts.byTool);
      const redis = session.backend === "redis";

      if (options.flag("json")) {
        io.stdout.write(
          jsonText({
            ...(redis ? { prefix } : { where: session.where }),
            target: session.label,
            serverTime: now,
            sampled: !complete,
            records: read,
            skippedKeys: skipped,
            sampleLimit: sample,
            dbsize,
            byState: total,
            byTool: Object.fromEntries(tools),
            expiredLeases,
            ...(oldestUnknown === undefined ? {} : { oldestUnknownMs: now - oldestUnknown }),
          }),
        );
        return ExitCode.ok;
      }
      const out = [
        `once stats: ${redis ? `prefix ${JSON.stringify(prefix)}` : session.where} on ${session.label}`,
        complete
          ? `every record read: ${read} record${read === 1 ? "" : "s"} (${redis ? "DBSIZE " : ""}${dbsize} ${await session.size()})`
          : `sampled ${read} of ~${dbsize} ${redis ? "keys (DBSIZE counts every key in the database, not only once's)" : await session.size()}: the counts below are of the sample`,
        "",
        renderTable(
          ["state", "records", "share"],
          [
            ...RECORD_STATES.map((state) => [state, String(total[state]), share(total[state], read)]),
            ["total", String(read), read === 0 ? "-" : "100%"],
          ],
          { right: [1, 2] },
        ),
      ];
      if (tools.length > 0) {
        out.push(
          "",
          renderTable(
            ["tool", "total", ...RECORD_STATES],
            tools.map(([tool, counts]) => [
              tool,
              String(RECORD_STATES.reduce((sum, s) => sum + counts[s], 0)),
              ...RECORD_STATES.map((s) => String(counts[s])),
            ]),
            // Every count right-aligned: the total and one column per state.
            { right: RECORD_STATES.map((_, i) => i + 1).concat(RECORD_STATES.length + 1) },
          ),
        );
      }
      const attention: string[] = [];
      if (total.unknown > 0 && oldestUnknown !== undefined) {
        attention.push(
          `${total.unknown} unknown (the oldest unchanged for ${formatDuration(now - oldestUnknown)}): see once list --state unknown`,
        );
      }
      if (expiredLeases > 0) {
        attention.push(
          `${expiredLeases} claimed or reconciling with an expired lease: their owners stopped; the next attempt takes over or reconciles`,
        );
      }
      if (skipped > 0) {
        attention.push(
          skipped === 1
            ? "1 key under the prefix is not a once record (skipped)"
            : `${skipped} keys under the prefix are not once records (skipped)`,
        );
      }
      if (attention.length > 0) out.push("", ...attention);
      io.stdout.write(`${out.join("\n")}\n`);
      return ExitCode.ok;
    });
  },
};

function share(n: number, of: number): string {
  return of === 0 ? "-" : `${((100 * n) / of).toFixed(1)}%`;
}
