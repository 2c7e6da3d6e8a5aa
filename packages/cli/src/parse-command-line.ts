import { parseArgs } from "node:util";
import { UsageError } from "./errors.js";
import { GLOBAL_OPTIONS, OPTIONS, type OptionName } from "./options.js";

/** The options given on a command line, read by name. */
export class ParsedOptions {
  readonly #values: Record<string, unknown>;

  constructor(values: Record<string, unknown>) {
    this.#values = values;
  }

  has(name: OptionName): boolean {
    return this.#values[name] !== undefined;
  }

  flag(name: OptionName): boolean {
    return this.#values[name] === true;
  }

  /** The option's value, or undefined; an empty value is bad usage. */
  string(name: OptionName): string | undefined {
    const value = this.#values[name];
    if (value === undefined) return undefined;
    if (typeof value !== "string") throw new Error(`--${name} is not a string option`);
    if (value.trim() === "") throw new UsageError(`--${name} needs a non-empty value`);
    return value;
  }

  /** Every value of a repeatable option, comma-separated values split, blanks dropped. */
  list(name: OptionName): string[] {
    const value = this.#values[name];
    if (value === undefined) return [];
    const values = Array.isArray(value) ? value : [value];
    return values
      .flatMap((v) => String(v).split(","))
      .map((v) => v.trim())
      .filter((v) => v !== "");
  }
}

export interface ParsedCommandLine {
  /** The first positional: the command's name (unchecked), or undefined when none was given. */
  command: string | undefined;
  positionals: string[];
  options: ParsedOptions;
}

/**
 * Parses `argv` against every option `once` knows (so global options work before or after the command),
 * then checks that each option given belongs to `allowedFor(command)`. Throws UsageError naming the
 * problem: an unknown option, a missing value, a value given to a flag, an option of another command.
 */
export function parseCommandLine(
  argv: readonly string[],
  allowedFor: (command: string | undefined) => readonly OptionName[] | undefined,
): ParsedCommandLine {
  let parsed: ReturnType<typeof parseAll>;
  try {
    parsed = parseAll(argv);
  } catch (error) {
    throw new UsageError(describeParseError(error), { cause: error });
  }
  const [command, ...positionals] = parsed.positionals;
  const given: OptionName[] = [];
  for (const token of parsed.tokens ?? []) {
    if (token.kind === "option") given.push(token.name as OptionName);
  }
  const allowed = allowedFor(command);
  if (allowed !== undefined) {
    for (const name of given) {
      if (!allowed.includes(name) && !GLOBAL_OPTIONS.includes(name)) {
        throw new UsageError(`--${name} is not an option of \`once ${command}\``);
      }
    }
  }
  return {
    command,
    positionals,
    options: new ParsedOptions(parsed.values as Record<string, unknown>),
  };
}

/**
 * The command word of a command line that may not parse: its first positional, read leniently (an option's
 * value is not a positional), so a usage error can point at the right help.
 */
export function commandWordOf(argv: readonly string[]): string | undefined {
  return parseArgs({ args: [...argv], options: OPTIONS, strict: false, allowPositionals: true })
    .positionals[0];
}

function parseAll(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    options: OPTIONS,
    strict: true,
    allowPositionals: true,
    tokens: true,
  });
}

/** node:util's messages, said the way the rest of `once` says things. */
function describeParseError(error: unknown): string {
  const message = (error as Error).message;
  // "Option '-y, --yes' does not take an argument": name the long form.
  const option = /'(?:-\w, )?(-{1,2}[^ ',]+)/.exec(message)?.[1];
  if (option === undefined) return message;
  if ((error as { code?: string }).code === "ERR_PARSE_ARGS_UNKNOWN_OPTION")
    return `unknown option ${option}`;
  if (/argument missing|ambiguous/.test(message)) return `${option} needs a value`;
  if (message.includes("does not take an argument")) return `${option} takes no value`;
  return message;
}
