import { DecisionRefusedError, type OnceRecord } from "@once/core";
import { ago, decisionRefusal, formatDuration } from "@once/core/internal";
import { askYes } from "../ask.js";
import type { Command } from "../command.js";
import { defaultBy } from "../default-by.js";
import { parseDuration } from "../durations.js";
import { UsageError } from "../errors.js";
import { ExitCode } from "../exit-code.js";
import { keyArgument } from "../key-argument.js";
import { CONNECTION_OPTIONS } from "../options.js";
import { jsonText, recordJson } from "../record-view.js";
import { interactive, storePrefix } from "../redis-connection.js";
import { withStore } from "../store-session.js";

type Decision = "approved" | "denied";

/** `once approve` and `once deny`: a person's decision about a call waiting for approval, fenced and bound to its fingerprint. */
function decideCommand(decision: Decision): Command {
  const verb = decision === "approved" ? "approve" : "deny";
  return {
    name: verb,
    summary:
      decision === "approved"
        ? "approve a call waiting for approval: its next attempt runs the effect, once"
        : "deny a call waiting for approval: it fails for good (denied), replayed to every retry",
    usage: [`${verb} <key> --why '<text>' [--by <who>] [--fingerprint <hex>] [--yes] [options]`],
    options: [
      "why",
      "by",
      "fingerprint",
      "yes",
      "retention",
      "task",
      "step",
      "namespace",
      ...CONNECTION_OPTIONS,
    ],
    details:
      "Only a record in state awaiting_approval whose request has not expired can be decided; any other " +
      "(no record, already approved or denied, expired, never asked) is refused (exit 1) and left as it is. The " +
      "record is read first and the write is fenced on the fence seen and bound to the call's fingerprint " +
      "(--fingerprint, when given, must be the record's: the call you were shown), so a record that changed in " +
      "between is refused too. Who (--by, default $USER@hostname), why (--why, required) and when are kept on " +
      "the record. Asks for confirmation on a terminal; without one, --yes is required (exit 2 otherwise).",
    examples: [
      `once ${verb} 3f9a…c2 --why '${decision === "approved" ? "customer confirmed by phone" : "over the refund limit"}'`,
      `once ${verb} --task order-1042 --step charge --why 'ticket 881' --yes`,
    ],
    async run({ io, options, positionals }) {
      const prefix = storePrefix(options);
      const { key } = keyArgument(positionals, options, prefix);
      const why = options.string("why");
      if (why === undefined) throw new UsageError("--why is required: say why, it is kept on the record");
      const by = options.string("by") ?? defaultBy(io.env);
      if (by.trim() === "") throw new UsageError("--by is empty: say who decides, it is kept on the record");
      const fingerprint = options.string("fingerprint");
      const retentionOption = options.string("retention");
      const retentionMs =
        retentionOption === undefined ? undefined : parseDuration("--retention", retentionOption);
      const confirmed = options.flag("yes");
      if (!confirmed && !interactive(io)) {
        throw new UsageError(
          `${verb} changes a record and asks for confirmation, but stdin is not a terminal: pass --yes to ${verb} without asking`,
        );
      }
      const json = options.flag("json");

      return withStore(options, io, async (session) => {
        const { operator } = session;
        const record = await operator.get(key);
        const now = await operator.now();
        if (record === undefined)
          return refuse(`no record for key ${key} ${session.where} on ${session.label}`);
        const refusal = decisionRefusal(
          record,
          { by, ...(fingerprint === undefined ? {} : { fingerprint }) },
          now,
        );
        if (refusal !== undefined) return refuse(`refused: ${refusal}. Nothing changed`, record);
        if (!confirmed) {
          io.stderr.write(`${describe(record, decision, by, why, now)}\n`);
          if (!(await askYes(io, `${verb === "approve" ? "Approve" : "Deny"} ${key}? Type yes to go on: `)))
            return refuse(`not ${decision}: not confirmed. Nothing changed`, record);
        }
        let outcome: Awaited<ReturnType<typeof operator.approve>>;
        try {
          outcome = await operator[verb](key, {
            by,
            why,
            expectFence: record.fence,
            fingerprint: fingerprint ?? record.fingerprint,
            ...(retentionMs === undefined ? {} : { retentionMs }),
          });
        } catch (error) {
          if (error instanceof DecisionRefusedError) return refuse(error.message, record);
          throw error;
        }
        const after = outcome.record;
        if (json) {
          io.stdout.write(
            jsonText({
              key,
              decided: true,
              as: decision,
              fence: outcome.fence,
              record: after === undefined ? null : recordJson(after, now),
            }),
          );
        } else {
          io.stdout.write(
            `${decision} ${key} → ${after?.state ?? "?"} (fence ${record.fence} → ${outcome.fence}), by ${by}: ${why}\n`,
          );
          io.stdout.write(
            decision === "approved"
              ? "the next attempt of this step runs the effect, once\n"
              : "every attempt of this step now fails with the denial; nothing runs\n",
          );
        }
        return ExitCode.ok;
      });

      function refuse(message: string, record?: OnceRecord): number {
        if (json)
          io.stdout.write(jsonText({ key, decided: false, reason: message, ...(record ? { record } : {}) }));
        io.stderr.write(`${message}\n`);
        return ExitCode.problem;
      }
    },
  };
}

function describe(record: OnceRecord, decision: Decision, by: string, why: string, now: number): string {
  const approval = record.approval;
  return [
    `key ${record.key} (${record.tool}), state ${record.state}, fence ${record.fence}, fingerprint ${record.fingerprint}`,
    `asked ${approval === undefined ? "?" : ago(approval.requestedAt, now)}: ${approval?.reason ?? "?"}`,
    `the request expires ${approval === undefined ? "?" : `in ${formatDuration(Math.max(0, approval.expiresAt - now))}`}`,
    decision === "approved"
      ? "APPROVE: the next attempt of this call runs the effect, once"
      : "DENY: the call fails for good (denied); nothing runs",
    `by ${by}, why: ${why}`,
  ].join("\n");
}

export const approveCommand: Command = decideCommand("approved");
export const denyCommand: Command = decideCommand("denied");
