// The retry-window terms alone: this subpath loads no BullMQ, so the audit runs where only the tools are.
import { type BackoffSetting, jobRetryWindow } from "@once/bullmq/retry-window";
import { type AnyTool, DEFAULT_LEASE_MS, DEFAULT_RETENTION_MS } from "@once/core";

/** The window the audit prints, with the longest lease it counted. */
type RetryWindow = ReturnType<typeof jobRetryWindow>;

import type { Command } from "../command.js";
import { formatDuration, parseDuration } from "../durations.js";
import { UsageError } from "../errors.js";
import { ExitCode } from "../exit-code.js";
import { type FoundTool, loadTools } from "../load-tools.js";
import type { ParsedOptions } from "../parse-command-line.js";
import { positiveInteger } from "../positive-integer.js";
import { jsonText } from "../record-view.js";
import { renderTable } from "../render-table.js";
import { sideEffectVerb } from "../side-effect-names.js";

/** The worker's default lease, and BullMQ's and the dispatcher's defaults. */
const DEFAULTS = {
  attempts: 1,
  leaseMs: DEFAULT_LEASE_MS,
  lockDurationMs: 30_000,
  stalledIntervalMs: 30_000,
  retentionMs: DEFAULT_RETENTION_MS,
  timeoutMs: 30_000,
  retries: 2,
  resumeGapMs: 0,
};

type FlagCode = "no-reconcile" | "side-effect-name" | "duplicate-name" | "retry-window";

interface Flag {
  tool?: string;
  code: FlagCode;
  message: string;
}

interface RetrySettings {
  attempts: number;
  backoff?: BackoffSetting;
  leaseMs: number;
  lockDurationMs: number;
  stalledIntervalMs: number;
  retentionMs: number;
  timeoutMs: number;
  retries: number;
  resumeGapMs: number;
}

/** `once audit`: what each tool declares, what is missing, and whether records outlive every retry. */
export const auditCommand: Command = {
  name: "audit",
  summary: "check a module's tools: kinds, hooks, leases, side-effect names, and the retry window",
  usage: [
    "audit --tools <module> [--attempts <n>] [--backoff <backoff>] [--lease <duration>] [--lock-duration <duration>]",
    "      [--stalled-interval <duration>] [--retention <duration>] [--timeout <duration>] [--retries <n>]",
    "      [--resume-gap <duration>] [--allow <tool>…]",
  ],
  options: [
    "tools",
    "attempts",
    "backoff",
    "lease",
    "lock-duration",
    "stalled-interval",
    "retention",
    "timeout",
    "retries",
    "resume-gap",
    "allow",
  ],
  details:
    "Imports <module> (a built .js/.mjs file) and audits every export that is a once tool or an array of them. " +
    "Flags (exit 1): an effect tool without a reconcile hook; a read or write tool whose name starts with a " +
    "side-effect verb (send_, charge_, create_, delete_, pay_, refund_, post_ … see README); two tools with one " +
    "name; a retention shorter than the worst-case retry window for the settings given (BullMQ's and the " +
    "dispatcher's defaults otherwise). --allow accepts a reviewed name flag. Exit 0 when nothing is flagged.",
  examples: [
    "once audit --tools ./dist/tools.js",
    "once audit --tools ./dist/tools.js --attempts 5 --backoff exponential:2s --retention 24h --json",
    "once audit --tools ./dist/tools.js --allow send_preview",
  ],
  async run({ io, options }) {
    const modulePath = options.string("tools");
    if (modulePath === undefined)
      throw new UsageError("--tools <module> is required: the JS module exporting your tools");
    const settings = retrySettings(options);
    const allowed = options.list("allow");
    const { file, tools } = await loadTools(modulePath, io.cwd);

    const flags: Flag[] = [];
    const notes: { tool?: string; message: string }[] = [];
    const byName = new Map<string, FoundTool[]>();
    for (const found of tools) byName.set(found.tool.name, [...(byName.get(found.tool.name) ?? []), found]);
    for (const [name, same] of byName) {
      if (same.length > 1) {
        flags.push({
          tool: name,
          code: "duplicate-name",
          message: `${same.length} different tools are named ${name} (exports ${same.flatMap((f) => f.exports).join(", ")}): a worker refuses two tools with one name, and a dispatcher would route by name`,
        });
      }
    }
    for (const { tool } of tools) {
      if (tool.kind === "effect") {
        if (tool.reconcile === undefined) {
          flags.push({
            tool: tool.name,
            code: "no-reconcile",
            message:
              "effect tool without a reconcile hook: after a crash or a timeout in run, its outcome stays unknown " +
              "and the call fails until an operator runs `once resolve`. Add reconcile(input, ctx) that asks the " +
              "provider whether the effect with ctx.key happened",
          });
        }
        if (tool.classifyError === undefined) {
          notes.push({
            tool: tool.name,
            message:
              "no classifyError: every failure of run counts as unknown (it may have happened). Classify declines " +
              "as terminal and refusals-before-acting as not_applied",
          });
        }
      } else {
        const verb = sideEffectVerb(tool.name);
        if (verb !== undefined && !allowed.includes(tool.name)) {
          flags.push({
            tool: tool.name,
            code: "side-effect-name",
            message:
              `${tool.kind} tool whose name starts with "${verb}": ${tool.kind} tools are retried freely and skip the ` +
              `store, so a side effect would repeat. Declare it kind "effect", or rename it, or pass --allow ${tool.name} once reviewed`,
          });
        }
      }
    }
    for (const name of allowed) {
      if (!byName.has(name)) notes.push({ message: `--allow ${name} matches no tool in the module` });
    }

    const effectTools = tools.map((f) => f.tool).filter((t) => t.kind === "effect");
    const window = windowFor(settings, effectTools);
    const leaseMs = window.leaseMs;
    const windowOk = settings.retentionMs >= window.worstCaseMs;
    if (effectTools.length > 0 && !windowOk) {
      flags.push({
        code: "retry-window",
        message:
          `retention ${formatDuration(settings.retentionMs)} is shorter than the worst-case retry window ` +
          `${formatDuration(window.worstCaseMs)}: a late retry finds no record and runs the effect again. ` +
          "Raise the store's retentionMs or shorten the retry chain (workers and dispatchers refuse to start so)",
      });
    }

    if (options.flag("json")) {
      io.stdout.write(
        jsonText({
          module: file,
          ok: flags.length === 0,
          tools: tools.map(({ tool, exports }) => ({
            name: tool.name,
            kind: tool.kind,
            exports,
            hooks: hooksOf(tool),
            ...(tool.kind === "effect" ? { leaseMs: tool.leaseMs ?? settings.leaseMs } : {}),
            flags: flags.filter((f) => f.tool === tool.name).map((f) => f.code),
          })),
          retryWindow: {
            applies: effectTools.length > 0,
            settings,
            leaseMs,
            terms: window.terms,
            worstCaseMs: window.worstCaseMs,
            retentionMs: settings.retentionMs,
            ok: windowOk,
          },
          flags,
          notes,
        }),
      );
      return flags.length === 0 ? ExitCode.ok : ExitCode.problem;
    }

    const out: string[] = [`once audit: ${tools.length} tool${tools.length === 1 ? "" : "s"} in ${file}`, ""];
    const yesNo = (tool: AnyTool, has: boolean) => (tool.kind === "effect" ? (has ? "yes" : "no") : "-");
    out.push(
      renderTable(
        ["tool", "kind", "prepare", "reconcile", "classifyError", "lease", "flags"],
        tools.map(({ tool }) => {
          const hooks = hooksOf(tool);
          const codes = flags.filter((f) => f.tool === tool.name).map((f) => f.code);
          return [
            tool.name,
            tool.kind,
            yesNo(tool, hooks.prepare),
            yesNo(tool, hooks.reconcile),
            yesNo(tool, hooks.classifyError),
            tool.kind !== "effect"
              ? "-"
              : tool.leaseMs === undefined
                ? `${formatDuration(settings.leaseMs)} (worker's)`
                : formatDuration(tool.leaseMs),
            codes.length === 0 ? "-" : codes.join(", "),
          ];
        }),
      ),
      "",
    );
    out.push(...describeWindow(settings, leaseMs, window, effectTools.length > 0, windowOk), "");
    if (flags.length > 0) {
      out.push(`Flags (${flags.length}):`);
      for (const flag of flags)
        out.push(`  ${flag.tool === undefined ? "retry window" : flag.tool}: ${flag.message}`);
      out.push("");
    }
    if (notes.length > 0) {
      out.push(`Notes (${notes.length}):`);
      for (const note of notes)
        out.push(`  ${note.tool === undefined ? "" : `${note.tool}: `}${note.message}`);
      out.push("");
    }
    out.push(flags.length === 0 ? "nothing flagged" : `${flags.length} flagged: exit 1`);
    io.stdout.write(`${out.join("\n")}\n`);
    return flags.length === 0 ? ExitCode.ok : ExitCode.problem;
  },
};

function hooksOf(tool: AnyTool) {
  return {
    prepare: typeof tool.prepare === "function",
    reconcile: typeof tool.reconcile === "function",
    classifyError: typeof tool.classifyError === "function",
  };
}

/** The window workers and dispatchers compute for these settings and tools (the same function). */
function windowFor(settings: RetrySettings, tools: readonly AnyTool[]): RetryWindow {
  return jobRetryWindow({
    tools,
    attempts: settings.attempts,
    ...(settings.backoff === undefined ? {} : { backoff: settings.backoff }),
    leaseMs: settings.leaseMs,
    lockDurationMs: settings.lockDurationMs,
    stalledIntervalMs: settings.stalledIntervalMs,
    dispatcher: { retries: settings.retries, timeoutMs: settings.timeoutMs },
    resumeGapMs: settings.resumeGapMs,
  });
}

function describeWindow(
  settings: RetrySettings,
  leaseMs: number,
  window: RetryWindow,
  applies: boolean,
  ok: boolean,
): string[] {
  const backoff =
    settings.backoff === undefined
      ? "no backoff"
      : typeof settings.backoff === "number"
        ? `fixed backoff ${formatDuration(settings.backoff)}`
        : `${settings.backoff.type} backoff ${formatDuration(settings.backoff.delay ?? 0)}`;
  const lines = [
    `Retry window: attempts ${settings.attempts}, ${backoff}, lease ${formatDuration(leaseMs)} (the longest), ` +
      `lockDuration ${formatDuration(settings.lockDurationMs)}, stalledInterval ${formatDuration(settings.stalledIntervalMs)}, ` +
      `dispatcher ${settings.retries} retries × ${formatDuration(settings.timeoutMs)}, resume gap ${formatDuration(settings.resumeGapMs)}`,
  ];
  const rows = window.terms.map((t) => [`  ${t.name}`, formatDuration(t.ms), t.detail]);
  rows.push(["  worst case", formatDuration(window.worstCaseMs), ""]);
  lines.push(
    renderTable(["", "", ""], rows, { right: [1], maxCellWidth: 100 })
      .split("\n")
      .slice(1)
      .join("\n"),
  );
  const verdict = !applies
    ? "n/a: no effect tools, nothing goes through the store"
    : ok
      ? `ok: retention ${formatDuration(settings.retentionMs)} ≥ worst case ${formatDuration(window.worstCaseMs)}`
      : `TOO SHORT: retention ${formatDuration(settings.retentionMs)} < worst case ${formatDuration(window.worstCaseMs)}`;
  lines.push(`  verdict: ${verdict}`);
  return lines;
}

function retrySettings(options: ParsedOptions): RetrySettings {
  const duration = (name: Parameters<ParsedOptions["string"]>[0], fallback: number) => {
    const text = options.string(name);
    return text === undefined ? fallback : parseDuration(`--${name}`, text);
  };
  const integer = (name: "attempts" | "retries", fallback: number, min: number) => {
    const text = options.string(name);
    return text === undefined ? fallback : positiveInteger(`--${name}`, text, min);
  };
  const backoffText = options.string("backoff");
  const settings: RetrySettings = {
    attempts: integer("attempts", DEFAULTS.attempts, 1),
    leaseMs: duration("lease", DEFAULTS.leaseMs),
    lockDurationMs: duration("lock-duration", DEFAULTS.lockDurationMs),
    stalledIntervalMs: duration("stalled-interval", DEFAULTS.stalledIntervalMs),
    retentionMs: duration("retention", DEFAULTS.retentionMs),
    timeoutMs: duration("timeout", DEFAULTS.timeoutMs),
    retries: integer("retries", DEFAULTS.retries, 0),
    resumeGapMs: duration("resume-gap", DEFAULTS.resumeGapMs),
  };
  if (backoffText !== undefined) settings.backoff = parseBackoff(backoffText);
  return settings;
}

/** `5s` (fixed), `fixed:5s`, `exponential:1s` (or `exp:1s`), as BullMQ's backoff option. */
function parseBackoff(text: string): BackoffSetting {
  const [type, delay] = text.includes(":") ? text.split(":", 2) : ["fixed", text];
  const delayMs = parseDuration("--backoff", delay ?? "");
  if (type === "fixed") return { type: "fixed", delay: delayMs };
  if (type === "exponential" || type === "exp") return { type: "exponential", delay: delayMs };
  throw new UsageError(`--backoff ${JSON.stringify(text)}: use 5s, fixed:5s or exponential:1s`);
}
