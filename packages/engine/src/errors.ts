import { OnceError } from "@once/core";

/** One term of the retry-window sum: a named stretch of time, and how it was computed. */
export interface RetryWindowTerm {
  name: string;
  ms: number;
  detail: string;
}

/** The codes of @once/engine's errors: stable, safe to match on. */
export type EngineErrorCode = "ONCE_RETRY_WINDOW" | "ONCE_DUPLICATE_TOOL" | "ONCE_INVALID_OPTION";

/** The record's retention is shorter than the worst-case retry window. */
export class RetryWindowError extends OnceError<"ONCE_RETRY_WINDOW"> {
  constructor(
    readonly retentionMs: number,
    readonly worstCaseMs: number,
    readonly terms: readonly RetryWindowTerm[],
  ) {
    const lines = terms.map((t) => `  ${t.name}: ${t.ms} ms (${t.detail})`).join("\n");
    super(
      "ONCE_RETRY_WINDOW",
      `retention ${retentionMs} ms is shorter than the worst-case retry window ${worstCaseMs} ms:\n${lines}\n` +
        "raise retentionMs or shorten the retry chain; an expired record lets a retry fire the effect again",
    );
  }
}

/** A tool is registered twice under one name. */
export class DuplicateToolError extends OnceError<"ONCE_DUPLICATE_TOOL"> {
  constructor(readonly tool: string) {
    super("ONCE_DUPLICATE_TOOL", `tool ${JSON.stringify(tool)} is registered twice`);
  }
}

/** An entry point's option is out of range (a lease too short to heartbeat, a negative resume gap). */
export class InvalidOptionError extends OnceError<"ONCE_INVALID_OPTION"> {
  constructor(
    readonly option: string,
    readonly value: unknown,
    rule: string,
  ) {
    super("ONCE_INVALID_OPTION", `${option} must be ${rule}, got ${JSON.stringify(value) ?? String(value)}`);
  }
}
