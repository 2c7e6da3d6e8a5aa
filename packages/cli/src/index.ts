// What a program running `once` in-process calls (the README's "As a library"): `runCli` against the streams
// it is given, the exit codes it resolves with, the duration format its options take (a bad one throws
// UsageError) and its output prints, and the side-effect verbs `once audit` flags.
export type { CliIo } from "./cli-io.js";
export { formatDuration, parseDuration } from "./durations.js";
export { UsageError } from "./errors.js";
export { ExitCode } from "./exit-code.js";
export { runCli } from "./run-cli.js";
export { sideEffectVerb } from "./side-effect-names.js";
