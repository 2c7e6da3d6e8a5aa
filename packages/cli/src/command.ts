import type { CliIo } from "./cli-io.js";
import type { OptionName } from "./options.js";
import type { ParsedOptions } from "./parse-command-line.js";

/** What a command is handed once its command line parsed. */
export interface CommandInput {
  io: CliIo;
  options: ParsedOptions;
  /** Positional arguments after the command's name. */
  positionals: readonly string[];
}

/** One `once <command>`: its help and what it runs. */
export interface Command {
  name: string;
  summary: string;
  /** Synopsis lines, without the leading `once `. */
  usage: readonly string[];
  /** The options it takes beyond --json and --help. */
  options: readonly OptionName[];
  /** A paragraph printed under the options in its help. */
  details?: string;
  examples: readonly string[];
  /** Resolves with the exit code. Throws UsageError for bad usage. */
  run(input: CommandInput): Promise<number>;
}
