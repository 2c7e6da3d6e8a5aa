import { ago, errorText, leaseText, stateMeaning } from "@once/core/internal";
import type { Command } from "../command.js";
import { formatDuration } from "../durations.js";
import { ExitCode } from "../exit-code.js";
import { keyArgument } from "../key-argument.js";
import { CONNECTION_OPTIONS } from "../options.js";
import { jsonText, recordJson } from "../record-view.js";
import { storePrefix } from "../redis-connection.js";
import { renderTable, truncate } from "../render-table.js";
import { withStore } from "../store-session.js";

const SHOWN_CHARS = 200;

/** `once inspect`: one record, every field, and what it means for the next attempt. */
export const inspectCommand: Command = {
  name: "inspect",
  summary: "show one record: state, phase, fence, owner, lease, claims, tool, times, result or error",
  usage: ["inspect <key> [options]", "inspect --task <taskId> --step <stepId> [--namespace <ns>] [options]"],
  options: ["task", "step", "namespace", ...CONNECTION_OPTIONS],
  details:
    "<key> is the 64-hex key, the BullMQ job id once-<key>, or the Redis key <prefix><key>. Results and errors " +
    `are cut at ${SHOWN_CHARS} characters; --json prints them whole. Exits 1 when there is no record.`,
  examples: [
    "once inspect 3f9a…c2",
    "once inspect --task order-1042 --step charge --namespace checkout",
    "once inspect once-3f9a…c2 --json",
  ],
  async run({ io, options, positionals }) {
    const prefix = storePrefix(options);
    const { key, derivedFrom } = keyArgument(positionals, options, prefix);
    return withStore(options, io, async (session) => {
      const record = await session.operator.get(key);
      const now = await session.operator.now();
      if (options.flag("json")) {
        io.stdout.write(
          jsonText({
            key,
            ...(session.backend === "redis"
              ? { redisKey: session.locate(key) }
              : { stored: session.locate(key) }),
            ...(derivedFrom === undefined ? {} : { derivedFrom }),
            found: record !== undefined,
            serverTime: now,
            ...(record === undefined ? {} : { record: recordJson(record, now) }),
          }),
        );
      }
      if (record === undefined) {
        io.stderr.write(
          `no record for key ${key} ${session.where} on ${session.label}` +
            ` (never claimed, expired after its retention, or another ${session.backend === "redis" ? "prefix" : "schema"}?)\n`,
        );
        return ExitCode.problem;
      }
      if (options.flag("json")) return ExitCode.ok;

      const rows: [string, string][] = [["key", key]];
      if (derivedFrom !== undefined) {
        rows.push([
          "step",
          `namespace ${derivedFrom.namespace}, task ${derivedFrom.taskId}, step ${derivedFrom.stepId}`,
        ]);
      }
      rows.push(
        [session.backend === "redis" ? "redis key" : "stored", session.locate(key)],
        ["state", `${record.state} — ${stateMeaning(record, now)}`],
        ["phase", record.phase],
        ["fence", String(record.fence)],
        ["owner", record.owner ?? "-"],
        ["lease", leaseText(record, now)],
        ["claims", String(record.claims)],
        ["tool", record.tool],
        ["fingerprint", record.fingerprint],
        ["created", `${iso(record.createdAt)} (${ago(record.createdAt, now)})`],
        ["updated", `${iso(record.updatedAt)} (${ago(record.updatedAt, now)})`],
        [
          "expires",
          record.ttlMs === undefined
            ? "never (no TTL: not written by once?)"
            : `in ${formatDuration(record.ttlMs)}`,
        ],
      );
      if (record.task !== undefined) {
        const t = record.task;
        rows.push(["task", `namespace ${t.namespace}, task ${t.taskId}, step ${t.stepId}`]);
      }
      if (record.cancellation !== undefined) {
        const c = record.cancellation;
        rows.push([
          "cancellation",
          `task cancelled by ${c.by} at ${iso(c.at)} (${ago(c.at, now)})${c.why === "" ? "" : `: ${shown(c.why)}`}`,
        ]);
      }
      if (record.trace !== undefined) rows.push(["trace", record.trace]);
      if (record.result !== undefined) rows.push(["result", shown(record.result)]);
      if (record.error !== undefined) rows.push(["error", shown(errorText(record.error))]);
      if (record.resolution !== undefined) {
        const r = record.resolution;
        rows.push(["resolution", `${r.as} by ${r.by} at ${iso(r.at)} (${ago(r.at, now)}): ${r.why}`]);
      }
      if (record.approval !== undefined) {
        const a = record.approval;
        rows.push([
          "approval",
          `asked ${iso(a.requestedAt)} (${ago(a.requestedAt, now)}), expires ${iso(a.expiresAt)}: ${shown(a.reason)}`,
        ]);
        const d = a.decision;
        if (d !== undefined)
          rows.push([
            "decision",
            d.as === "expired"
              ? `expired, noticed at ${iso(d.at)}`
              : `${d.as} by ${d.by} at ${iso(d.at)} (${ago(d.at, now)}): ${d.why}`,
          ]);
      }
      const table = renderTable(["field", "value"], rows, { maxCellWidth: SHOWN_CHARS + 40 });
      // The header row says nothing a reader needs here.
      io.stdout.write(`${table.split("\n").slice(1).join("\n")}\n`);
      if (record.state === "unknown") {
        const where = whereOptions(options, prefix);
        io.stdout.write(
          `\nnext: find out whether the effect happened, then\n` +
            `  once resolve ${key}${where} --applied --result '<json>' --why '…'\n` +
            `  once resolve ${key}${where} --not-applied --why '…'     (the next attempt runs the effect again)\n` +
            `  once resolve ${key}${where} --failed --error '<message>' --why '…'\n`,
        );
      }
      if (record.state === "awaiting_approval" && (record.approval?.expiresAt ?? 0) > now) {
        const where = whereOptions(options, prefix);
        io.stdout.write(
          `\nnext: decide it (fenced on fence ${record.fence}, bound to fingerprint ${record.fingerprint})\n` +
            `  once approve ${key}${where} --fingerprint ${record.fingerprint} --why '…'   (the next attempt runs the effect, once)\n` +
            `  once deny ${key}${where} --fingerprint ${record.fingerprint} --why '…'      (the call fails for good)\n`,
        );
      }
      const task = record.task ?? derivedFrom;
      if (task !== undefined) {
        const where = whereOptions(options, prefix);
        const namespace = task.namespace === "default" ? "" : ` --namespace ${task.namespace}`;
        io.stdout.write(
          `\nits task: once task ${task.taskId}${namespace}${where}` +
            (record.cancellation === undefined
              ? `\nto stop the task: once cancel --task ${task.taskId}${namespace}${where} --why '…'\n`
              : "\n"),
        );
      }
      return ExitCode.ok;
    });
  },
};

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function shown(text: string): string {
  const length = [...text].length;
  return length <= SHOWN_CHARS ? text : `${truncate(text, SHOWN_CHARS)} (${length} chars; --json for all)`;
}

/** The options that name the same store again, for the commands `inspect` suggests. */
function whereOptions(options: Parameters<Command["run"]>[0]["options"], prefix: string): string {
  const postgres = options.string("postgres-url");
  if (postgres === undefined) return prefix === "once:" ? "" : ` --prefix ${prefix}`;
  const schema = options.string("schema");
  const tablePrefix = options.string("table-prefix");
  return ` --postgres-url '${postgres}'${schema === undefined ? "" : ` --schema ${schema}`}${tablePrefix === undefined ? "" : ` --table-prefix ${tablePrefix}`}`;
}
