import { RECORD_STATES, type RecordState } from "@once/core";
import type { Command } from "../command.js";
import { formatDuration } from "../durations.js";
import { ExitCode } from "../exit-code.js";
import { CONNECTION_OPTIONS } from "../options.js";
import { positiveInteger } from "../positive-integer.js";
import { jsonText, leaseRemaining } from "../record-view.js";
import { storePrefix } from "../redis-connection.js";
import { renderTable } from "../render-table.js";
import { withStore } from "../store-session.js";

const DEFAULT_SAMPLE = 10_000;

type Counts = Record<RecordState, number>;

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
      const now = await session.now();
      const total = emptyCounts();
      const byTool = new Map<string, Counts>();
      const seen = new Set<string>();
      let skipped = 0;
      let complete = true;
      let expiredLeases = 0;
      let oldestUnknown: number | undefined;
      for await (const record of session.scan(() => skipped++)) {
        if (seen.has(record.key)) continue;
        if (seen.size + skipped >= sample) {
          complete = false;
          break;
        }
        seen.add(record.key);
        total[record.state]++;
        const counts = byTool.get(record.tool) ?? emptyCounts();
        counts[record.state]++;
        byTool.set(record.tool, counts);
        if (
          (record.state === "claimed" || record.state === "reconciling") &&
          leaseRemaining(record, now) <= 0
        ) {
          expiredLeases++;
        }
        if (record.state === "unknown")
          oldestUnknown = Math.min(oldestUnknown ?? record.updatedAt, record.updatedAt);
      }
      const read = seen.size;
      const size = await session.size();
      const dbsize = size.count;
      const tools = [...byTool.entries()].sort(([a], [b]) => a.localeCompare(b));

      if (options.flag("json")) {
        io.stdout.write(
          jsonText({
            ...(session.backend === "redis" ? { prefix } : { where: session.where }),
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
        `once stats: ${session.backend === "redis" ? `prefix ${JSON.stringify(prefix)}` : session.where} on ${session.label}`,
        complete
          ? `every record read: ${read} record${read === 1 ? "" : "s"} (${session.backend === "redis" ? "DBSIZE " : ""}${dbsize} ${size.of})`
          : `sampled ${read} of ~${dbsize} ${session.backend === "redis" ? "keys (DBSIZE counts every key in the database, not only once's)" : size.of}: the counts below are of the sample`,
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
            { right: [1, 2, 3, 4, 5, 6, 7] },
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

function emptyCounts(): Counts {
  return { claimed: 0, reconciling: 0, released: 0, done: 0, failed: 0, unknown: 0 };
}

function share(n: number, of: number): string {
  return of === 0 ? "-" : `${((100 * n) / of).toFixed(1)}%`;
}
