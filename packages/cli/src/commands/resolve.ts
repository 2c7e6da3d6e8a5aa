import {
  type AnyTool,
  InvalidOutputError,
  type OnceRecord,
  parseOutput,
  type ResolveDecision,
} from "@once/core";
import { ago, errorText, formatDuration, resolveRefusal } from "@once/core/internal";
import { askYes } from "../ask.js";
import type { Command } from "../command.js";
import { defaultBy } from "../default-by.js";
import { parseDuration } from "../durations.js";
import { UsageError } from "../errors.js";
import { ExitCode } from "../exit-code.js";
import { keyArgument } from "../key-argument.js";
import { loadTools } from "../load-tools.js";
import { CONNECTION_OPTIONS } from "../options.js";
import type { ParsedOptions } from "../parse-command-line.js";
import { jsonText, recordJson } from "../record-view.js";
import { interactive, storePrefix } from "../redis-connection.js";
import { truncate } from "../render-table.js";
import { withStore } from "../store-session.js";

/** `once resolve`: an operator's way out of `unknown`, fenced against the record read just before. */
export const resolveCommand: Command = {
  name: "resolve",
  summary: "resolve an unknown record: --applied, --not-applied or --failed, with who and why",
  usage: [
    "resolve <key> --applied --result '<json>' --why '<text>' [--by <who>] [--yes] [options]",
    "resolve <key> --not-applied --why '<text>' [--by <who>] [--yes] [options]",
    "resolve <key> --failed --error '<message>' [--error-code <code>] --why '<text>' [--by <who>] [--yes] [options]",
  ],
  options: [
    "applied",
    "not-applied",
    "failed",
    "result",
    "error",
    "error-code",
    "why",
    "by",
    "yes",
    "retention",
    "tools",
    "task",
    "step",
    "namespace",
    ...CONNECTION_OPTIONS,
  ],
  details:
    "Only a record in state unknown can be resolved; any other is refused (exit 1) and left as it is. The " +
    "record is read first and the write is fenced on the fence seen, so a record that changed in between is " +
    "refused too. --applied replays --result to every later attempt; --not-applied releases the key and the " +
    "next attempt RUNS THE EFFECT AGAIN; --failed replays --error. Who (--by, default $USER@hostname), why " +
    "(--why, required) and when are kept on the record. Asks for confirmation on a terminal; without one, " +
    "--yes is required (exit 2 otherwise). --tools <module> checks --result against the tool's output schema. " +
    "The record keeps the retention it was written with (derived from its TTL) unless --retention is given.",
  examples: [
    `once resolve 3f9a…c2 --applied --result '{"chargeId":"ch_123"}' --why 'found in the Stripe dashboard'`,
    "once resolve 3f9a…c2 --not-applied --why 'provider has no charge with this key' --yes",
    "once resolve --task order-1042 --step charge --failed --error 'card declined' --why 'support ticket 881'",
  ],
  async run({ io, options, positionals }) {
    const prefix = storePrefix(options);
    const { key } = keyArgument(positionals, options, prefix);
    const decision = decisionFrom(options);
    const why = options.string("why");
    if (why === undefined) throw new UsageError("--why is required: say why, it is kept on the record");
    const by = options.string("by") ?? defaultBy(io.env);
    const retentionOption = options.string("retention");
    const retentionMs =
      retentionOption === undefined ? undefined : parseDuration("--retention", retentionOption);
    const confirmed = options.flag("yes");
    if (!confirmed && !interactive(io)) {
      throw new UsageError(
        "resolve changes a record and asks for confirmation, but stdin is not a terminal: pass --yes to resolve without asking",
      );
    }
    const toolsModule = options.string("tools");
    const tools = toolsModule === undefined ? undefined : await loadTools(toolsModule, io.cwd);
    const json = options.flag("json");

    return withStore(options, io, async (session) => {
      const { operator } = session;
      const record = await operator.get(key);
      const now = await operator.now();
      if (record === undefined) {
        return refuse(`no record for key ${key} ${session.where} on ${session.label}`);
      }
      const refusal = resolveRefusal(record, undefined);
      if (refusal !== undefined) return refuse(`refused: ${refusal}. Nothing changed`, record);
      const final = withCheckedResult(
        decision,
        record,
        tools?.tools.map((t) => t.tool),
      );

      if (!confirmed) {
        io.stderr.write(`${describe(record, final, by, why, now)}\n`);
        if (!(await askYes(io, `Resolve ${key} as ${final.as.replace("_", " ")}? Type yes to go on: `))) {
          return refuse("not resolved: not confirmed. Nothing changed", record);
        }
      }
      // Fenced on the record read above; it keeps the retention it was written with unless --retention.
      const outcome = await operator.resolve(key, {
        decision: final,
        by,
        why,
        expectFence: record.fence,
        ...(retentionMs === undefined ? {} : { retentionMs }),
      });
      if (outcome.outcome !== "resolved") {
        return refuse(
          `refused by ${session.backend === "redis" ? "Redis" : "PostgreSQL"}: ${outcome.reason}. Nothing changed; inspect the record and try again`,
          record,
        );
      }
      const after = outcome.record;
      if (json) {
        io.stdout.write(
          jsonText({
            key,
            resolved: true,
            as: final.as,
            fence: outcome.fence,
            record: after === undefined ? null : recordJson(after, now),
          }),
        );
      } else {
        io.stdout.write(
          `resolved ${key}: ${final.as.replace("_", " ")} → ${after?.state ?? "?"} ` +
            `(fence ${record.fence} → ${outcome.fence}), by ${by}: ${why}\n`,
        );
        if (final.as === "not_applied") {
          io.stdout.write("the key is released: the next attempt of this step runs the effect again\n");
        }
      }
      return ExitCode.ok;
    });

    function refuse(message: string, record?: OnceRecord): number {
      if (json)
        io.stdout.write(jsonText({ key, resolved: false, reason: message, ...(record ? { record } : {}) }));
      io.stderr.write(`${message}\n`);
      return ExitCode.problem;
    }
  },
};

function decisionFrom(options: ParsedOptions): ResolveDecision {
  const chosen = (["applied", "not-applied", "failed"] as const).filter((name) => options.flag(name));
  if (chosen.length !== 1) {
    throw new UsageError(
      chosen.length === 0
        ? "say what happened: --applied --result '<json>', --not-applied, or --failed --error '<message>'"
        : `choose one of ${chosen.map((c) => `--${c}`).join(", ")}`,
    );
  }
  const result = options.string("result");
  const error = options.string("error");
  const code = options.string("error-code");
  if (chosen[0] !== "applied" && result !== undefined) throw new UsageError("--result goes with --applied");
  if (chosen[0] !== "failed" && (error !== undefined || code !== undefined)) {
    throw new UsageError(`--${error !== undefined ? "error" : "error-code"} goes with --failed`);
  }
  switch (chosen[0]) {
    case "applied": {
      if (result === undefined)
        throw new UsageError("--applied needs --result '<json>': the result to replay");
      try {
        // Stored as compact JSON, the way the worker stores a result.
        return { as: "applied", result: JSON.stringify(JSON.parse(result)) };
      } catch (cause) {
        throw new UsageError(`--result is not JSON: ${(cause as Error).message}`, { cause });
      }
    }
    case "failed":
      if (error === undefined)
        throw new UsageError("--failed needs --error '<message>': the failure to replay");
      return {
        as: "failed",
        error: { name: "Error", message: error, ...(code === undefined ? {} : { code }) },
      };
    default:
      return { as: "not_applied" };
  }
}

/** With --tools, the result as the tool's output schema parses it; a result it rejects is bad usage. */
function withCheckedResult(
  decision: ResolveDecision,
  record: OnceRecord,
  tools: readonly AnyTool[] | undefined,
): ResolveDecision {
  if (decision.as !== "applied" || tools === undefined) return decision;
  const tool = tools.find((t) => t.name === record.tool);
  if (tool === undefined) {
    throw new UsageError(
      `--tools exports no tool named ${JSON.stringify(record.tool)} (the record's tool); it has ${tools.map((t) => t.name).join(", ")}`,
    );
  }
  try {
    return { as: "applied", result: JSON.stringify(parseOutput(tool, JSON.parse(decision.result))) };
  } catch (error) {
    if (error instanceof InvalidOutputError) {
      throw new UsageError(
        `--result does not match ${tool.name}'s output schema: ${error.issues.join("; ")}`,
      );
    }
    throw error;
  }
}

function describe(
  record: OnceRecord,
  decision: ResolveDecision,
  by: string,
  why: string,
  now: number,
): string {
  const lines = [
    `key ${record.key} (${record.tool}), state unknown, fence ${record.fence}, claims ${record.claims}, updated ${ago(record.updatedAt, now)}`,
  ];
  if (record.error !== undefined) lines.push(`last error: ${truncate(errorText(record.error), 200)}`);
  if (decision.as === "applied") {
    lines.push(
      `resolve as APPLIED with result ${truncate(decision.result, 200)}: it is replayed to every later attempt; nothing runs again`,
    );
  } else if (decision.as === "failed") {
    lines.push(
      `resolve as FAILED with ${errorText(decision.error)}: every later attempt fails with it; nothing runs again`,
    );
  } else {
    lines.push(
      "resolve as NOT APPLIED: the key is released and the next attempt RUNS THE EFFECT AGAIN. Be sure it did not happen",
    );
  }
  lines.push(
    `by ${by}, why: ${why}`,
    `record expires ${record.ttlMs === undefined ? "never" : `in ${formatDuration(record.ttlMs)}`}`,
  );
  return lines.join("\n");
}
