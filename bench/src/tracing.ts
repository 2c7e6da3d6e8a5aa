import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from "@opentelemetry/core";
import { BatchSpanProcessor, type SpanExporter, TracerProvider } from "@opentelemetry/sdk-trace";

/** An exporter that takes every batch and drops it: the SDK's whole cost, none of a collector's. */
const dropping: SpanExporter = {
  export: (_spans, done) => done({ code: 0 }),
  shutdown: async () => {},
};

/**
 * Runs `fn` with an OpenTelemetry SDK registered as an app would: a tracer provider with a batch span
 * processor (an exporter that drops), the async-hooks context manager, W3C trace-context and baggage
 * propagators. Everything is unregistered afterwards, so later sections run without it.
 */
export async function withTracingSdk<T>(fn: () => Promise<T>): Promise<T> {
  const provider = new TracerProvider({ spanProcessors: [new BatchSpanProcessor({ exporter: dropping })] });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );
  try {
    return await fn();
  } finally {
    await provider.shutdown();
    trace.disable();
    context.disable();
    propagation.disable();
  }
}
