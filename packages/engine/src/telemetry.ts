import { createRequire } from "node:module";
import type { AnyTool } from "@once/core";
import { OnceError } from "@once/core";
import {
  type Attributes,
  type Context,
  type Counter,
  context,
  type Histogram,
  type Meter,
  metrics,
  propagation,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import {
  ATTR_ERROR_TYPE,
  ATTR_EXCEPTION_MESSAGE,
  ATTR_EXCEPTION_TYPE,
  ATTR_ONCE_INPUT,
  ATTR_ONCE_KIND,
  ATTR_ONCE_NAMESPACE,
  ATTR_ONCE_OUTCOME,
  ATTR_ONCE_RESULT,
  ATTR_ONCE_STEP_ID,
  ATTR_ONCE_TASK_ID,
  ATTR_ONCE_TOOL,
  METRIC_CLAIM_DURATION,
  METRIC_OUTCOMES,
} from "./attributes.js";

// The instrumentation scope is this package, at the version installed: read from its own package.json (one
// directory up from both src/ and dist/), so a release never reports a stale version.
const { name: INSTRUMENTATION, version: VERSION } = createRequire(import.meta.url)("../package.json") as {
  name: string;
  version: string;
};
const PAYLOAD_LIMIT = 4096;

/** once's meter, named and versioned as this package: every once instrument is made on it. */
export function onceMeter(): Meter {
  return metrics.getMeter(INSTRUMENTATION, VERSION);
}

export interface TelemetryOptions {
  /**
   * Put tool inputs, results and error messages into spans. Off by default: they can hold personal
   * data and secrets. Error types and once's own codes are always recorded.
   */
  recordPayloads?: boolean;
}

/**
 * The one home of once's spans and metrics. Uses `@opentelemetry/api` only: without an SDK every
 * call is a no-op. Instruments are made when an entry point is made, after the app's SDK starts.
 */
export class Telemetry {
  readonly tracer: Tracer;
  readonly recordPayloads: boolean;
  readonly outcomes: Counter;
  readonly claimDuration: Histogram;
  /** once's meter, for the instruments a transport adds (the dispatcher's timeouts and re-enqueues). */
  readonly meter: Meter;

  constructor(options: TelemetryOptions = {}) {
    this.tracer = trace.getTracer(INSTRUMENTATION, VERSION);
    this.recordPayloads = options.recordPayloads ?? false;
    const meter = onceMeter();
    this.meter = meter;
    this.outcomes = meter.createCounter(METRIC_OUTCOMES, {
      description: "Claim outcomes and call endings, by tool and outcome",
    });
    this.claimDuration = meter.createHistogram(METRIC_CLAIM_DURATION, {
      description: "Time to claim a key in the store",
      unit: "ms",
    });
  }

  /**
   * Runs `fn` in a new active span; owns the span's status, exceptions and end. An error whose
   * `expected(error)` is true (a delay, an in-flight wait) leaves the status unset.
   */
  async span<T>(
    name: string,
    options: { kind?: SpanKind; attributes?: Attributes; parent?: Context },
    fn: (span: Span) => Promise<T>,
    expected: (error: unknown) => boolean = () => false,
  ): Promise<T> {
    const parent = options.parent ?? context.active();
    const span = this.tracer.startSpan(
      name,
      { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes },
      parent,
    );
    try {
      // Without a tracing SDK the span records nothing and has no valid context: made active, it would change
      // nothing a child span or a propagator sees, so the context is left as it is.
      if (!span.isRecording() && parent === context.active() && !trace.isSpanContextValid(span.spanContext()))
        return await fn(span);
      return await context.with(trace.setSpan(parent, span), () => fn(span));
    } catch (error) {
      if (!expected(error)) this.fail(span, error);
      throw error;
    } finally {
      span.end();
    }
  }

  /** Marks a span failed: the error's type always, its message only when payloads are recorded. */
  fail(span: Span, error: unknown): void {
    const type = errorType(error);
    span.setAttribute(ATTR_ERROR_TYPE, type);
    const message = error instanceof Error ? error.message : String(error);
    span.addEvent("exception", {
      [ATTR_EXCEPTION_TYPE]: type,
      ...(this.recordPayloads ? { [ATTR_EXCEPTION_MESSAGE]: message } : {}),
    });
    span.setStatus({
      code: SpanStatusCode.ERROR,
      ...(this.recordPayloads ? { message } : { message: type }),
    });
  }

  /** Records a claim outcome (or a call's ending) on the span and the outcomes counter. */
  outcome(span: Span, tool: string, outcome: string): void {
    span.setAttribute(ATTR_ONCE_OUTCOME, outcome);
    this.outcomes.add(1, { [ATTR_ONCE_TOOL]: tool, [ATTR_ONCE_OUTCOME]: outcome });
  }

  /** Adds input or result JSON to a span, when the user opted in. */
  payload(span: Span, which: "input" | "result", value: unknown): void {
    if (!this.recordPayloads) return;
    let text: string;
    try {
      text = JSON.stringify(value) ?? "undefined";
    } catch {
      text = "(not JSON)";
    }
    span.setAttribute(which === "input" ? ATTR_ONCE_INPUT : ATTR_ONCE_RESULT, text.slice(0, PAYLOAD_LIMIT));
  }
}

/** The attributes that name a call: its tool and kind, and the parts of its key. */
export function callAttributes(
  tool: AnyTool,
  step: { namespace: string; taskId?: string | undefined; stepId?: string | undefined },
): Attributes {
  return {
    [ATTR_ONCE_TOOL]: tool.name,
    [ATTR_ONCE_KIND]: tool.kind,
    [ATTR_ONCE_NAMESPACE]: step.namespace,
    ...(step.taskId === undefined ? {} : { [ATTR_ONCE_TASK_ID]: step.taskId }),
    ...(step.stepId === undefined ? {} : { [ATTR_ONCE_STEP_ID]: step.stepId }),
  };
}

/**
 * The trace context of the active span, for the job data, written by the app's configured propagators (W3C
 * trace context and baggage with the SDK's defaults). Without a registered propagator nothing travels.
 */
export function currentTraceCarrier(): Record<string, string> | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return Object.keys(carrier).length > 0 ? carrier : undefined;
}

/** The context to parent a consumer span on: the producer's, read from the job data by the same propagators. */
export function contextFromCarrier(carrier: unknown): Context {
  if (typeof carrier !== "object" || carrier === null) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, carrier as Record<string, string>);
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * The W3C traceparent of a span, as a record keeps it: the link from a replay to the attempt that executed. A
 * stored identifier, not propagation (nothing is parented on it), so it is written the same whatever the app's
 * propagators are. Undefined for a span without a valid context (no tracing SDK).
 */
export function traceparentOf(sc: SpanContext): string | undefined {
  if (!trace.isSpanContextValid(sc)) return undefined;
  return `00-${sc.traceId}-${sc.spanId}-${sc.traceFlags.toString(16).padStart(2, "0")}`;
}

/** The span context a stored traceparent names, or undefined for anything malformed. */
export function parseTraceparent(value: unknown): SpanContext | undefined {
  if (typeof value !== "string") return undefined;
  const match = TRACEPARENT.exec(value);
  if (!match) return undefined;
  const sc: SpanContext = {
    traceId: match[1] as string,
    spanId: match[2] as string,
    traceFlags: Number.parseInt(match[3] as string, 16),
    isRemote: true,
  };
  return trace.isSpanContextValid(sc) ? sc : undefined;
}

/**
 * once's own error name where there is one, else the class name. A transport may wrap once's error to tell its
 * queue not to retry (BullMQ's `UnrecoverableError`, with once's error as `cause`): the cause names it then.
 */
function errorType(error: unknown): string {
  if (OnceError.is(error)) return error.name;
  const cause = (error as { cause?: unknown } | null | undefined)?.cause;
  if (OnceError.is(cause)) return cause.name;
  return error instanceof Error ? error.name : typeof error;
}
