export type { CliIo } from "./cli-io.js";
export { processIo } from "./cli-io.js";
export { formatDuration, parseDuration } from "./durations.js";
export { CommandFailedError, UsageError } from "./errors.js";
export { ExitCode } from "./exit-code.js";
export { runCli } from "./run-cli.js";
export { SIDE_EFFECT_VERBS, sideEffectVerb } from "./side-effect-names.js";
