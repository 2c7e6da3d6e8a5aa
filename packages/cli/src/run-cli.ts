import { readFileSync } from "node:fs";
import { RecordLayoutError, StoreUnavailableError } from "@once/core";
import type { CliIo } from "./cli-io.js";
import type { Command } from "./command.js";
import { auditCommand } from "./commands/audit.js";
import { consoleCommand } from "./commands/console.js";
import { approveCommand, denyCommand } from "./commands/decide.js";
import { doctorCommand } from "./commands/doctor.js";
import { inspectCommand } from "./commands/inspect.js";
import { listCommand } from "./commands/list.js";
import { resolveCommand } from "./commands/resolve.js";
import { statsCommand } from "./commands/stats.js";
import { cancelCommand, taskCommand } from "./commands/task.js";
import { CommandFailedError, UsageError } from "./errors.js";
import { ExitCode } from "./exit-code.js";
import { GLOBAL_OPTIONS, OPTIONS, type OptionName } from "./options.js";
import { commandWordOf, parseCommandLine } from "./parse-command-line.js";

const COMMANDS: readonly Command[] = [
  inspectCommand,
  listCommand,
  resolveCommand,
  approveCommand,
  denyCommand,
  taskCommand,
  cancelCommand,
  auditCommand,
  doctorCommand,
  statsCommand,
  consoleCommand,
];

/** The commands that take an argument: a record's key (or --task and --step), or `task`'s task id. */
const TAKES_KEY = new Set(["inspect", "resolve", "approve", "deny", "task"]);

/**
 * Runs one `once` command line and resolves with its exit code: 0 ok, 1 a problem found (or a refusal),
 * 2 bad usage. Never throws and never exits the process: main.ts does that.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  // Known before parsing, so that even a parse error points at the right help.
  let command = find(commandWordOf(argv));
  try {
    if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-v")) {
      io.stdout.write(`${version()}\n`);
      return ExitCode.ok;
    }
    const parsed = parseCommandLine(argv, (name) => find(name === "help" ? undefined : name)?.options);
    if (parsed.command === undefined || parsed.command === "help") {
      const topic = parsed.command === "help" ? parsed.positionals[0] : undefined;
      const about = topic === undefined ? undefined : find(topic);
      if (topic !== undefined && about === undefined)
        throw new UsageError(`unknown command ${JSON.stringify(topic)}`);
      if (parsed.command === undefined && !parsed.options.flag("help")) {
        io.stderr.write(generalHelp());
        return ExitCode.usage;
      }
      io.stdout.write(about === undefined ? generalHelp() : commandHelp(about));
      return ExitCode.ok;
    }
    command = find(parsed.command);
    if (command === undefined) throw new UsageError(`unknown command ${JSON.stringify(parsed.command)}`);
    if (parsed.options.flag("help")) {
      io.stdout.write(commandHelp(command));
      return ExitCode.ok;
    }
    if (!TAKES_KEY.has(command.name) && parsed.positionals.length > 0) {
      throw new UsageError(
        `\`once ${command.name}\` takes no arguments, got ${parsed.positionals.join(" ")}`,
      );
    }
    return await command.run({ io, options: parsed.options, positionals: parsed.positionals });
  } catch (error) {
    return report(error, command, io);
  }
}

function report(error: unknown, command: Command | undefined, io: CliIo): number {
  if (error instanceof UsageError) {
    const help = command === undefined ? "once --help" : `once ${command.name} --help`;
    io.stderr.write(`once: ${error.message}\n(see ${help})\n`);
    return ExitCode.usage;
  }
  if (error instanceof CommandFailedError) {
    io.stderr.write(`once: ${error.message}\n`);
    return ExitCode.problem;
  }
  if (error instanceof StoreUnavailableError) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
    io.stderr.write(`once: ${error.message}${cause}\n`);
    return ExitCode.problem;
  }
  // A record a newer build wrote: the operator's way forward is an upgrade, which the message names.
  if (error instanceof RecordLayoutError) {
    io.stderr.write(`once: ${error.message}\n`);
    return ExitCode.problem;
  }
  const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
  io.stderr.write(`once: unexpected error: ${message}\n`);
  return ExitCode.problem;
}

function find(name: string | undefined): Command | undefined {
  return COMMANDS.find((c) => c.name === name);
}

function generalHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    "once: inspect and repair the once dedup store, audit tools, check Redis",
    "",
    "usage: once <command> [options]",
    "",
    "commands:",
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    "",
    "options of every command:",
    ...describeOptions(GLOBAL_OPTIONS),
    "",
    "exit codes: 0 ok, 1 found a problem (or refused), 2 bad usage",
    "run `once <command> --help` for a command's options and examples",
    "",
  ].join("\n");
}

function commandHelp(command: Command): string {
  return [
    `once ${command.name}: ${command.summary}`,
    "",
    "usage:",
    ...command.usage.map((u) => `  once ${u}`),
    "",
    "options:",
    ...describeOptions([...command.options, ...GLOBAL_OPTIONS]),
    ...(command.details === undefined ? [] : ["", ...wrap(command.details, 100)]),
    "",
    "examples:",
    ...command.examples.map((e) => `  ${e}`),
    "",
    "exit codes: 0 ok, 1 found a problem (or refused), 2 bad usage",
    "",
  ].join("\n");
}

function describeOptions(names: readonly OptionName[]): string[] {
  const labels = names.map((name) => {
    const spec = OPTIONS[name];
    const short = "short" in spec ? `-${spec.short}, ` : "";
    return `${short}--${name}${"value" in spec ? ` ${spec.value}` : ""}`;
  });
  const width = Math.max(...labels.map((l) => l.length));
  return names.map((name, i) => `  ${(labels[i] ?? "").padEnd(width)}  ${OPTIONS[name].description}`);
}

function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/)) {
    if (line !== "" && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === "" ? word : `${line} ${word}`;
    }
  }
  if (line !== "") lines.push(line);
  return lines;
}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
    version: string;
  };
  return pkg.version;
}
