import type { NodeSDK } from "@opentelemetry/sdk-node";

export interface TracingOptions {
  /** The `service.name` of this process: one per app (`once-orchestrator`, `once-worker`, …). */
  serviceName: string;
  /** Read instead of `process.env` (tests). */
  env?: Record<string, string | undefined>;
  /** Where the one-line notices go. Default: stderr. */
  log?: (line: string) => void;
}

export interface Tracing {
  /** False when no OTLP endpoint is configured: no SDK was started and spans are no-ops. */
  readonly enabled: boolean;
  /** `http/json` or `http/protobuf` when enabled. */
  readonly protocol: OtlpProtocol | undefined;
  /** Flushes and stops the SDK; never throws (a refused export is reported in one line). */
  shutdown(): Promise<void>;
}

export type OtlpProtocol = "http/json" | "http/protobuf";

const SHUTDOWN_TIMEOUT_MS = 5_000;

/**
 * Starts OpenTelemetry's Node SDK exporting spans over OTLP/HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT` (or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), as JSON or protobuf per `OTEL_EXPORTER_OTLP_PROTOCOL` (default
 * http/protobuf). Without an endpoint it starts nothing, and does not even load the SDK (a few hundred ms
 * of start-up per process). Call it before building dispatchers and workers: once's instruments bind to
 * the providers that exist when they are made.
 */
export async function startTracing(options: TracingOptions): Promise<Tracing> {
  const env = options.env ?? process.env;
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint || isTrue(env.OTEL_SDK_DISABLED)) {
    return { enabled: false, protocol: undefined, shutdown: async () => {} };
  }
  const protocol = otlpProtocol(env, (line) => log(`${options.serviceName}: ${line}`));
  const { NodeSDK } = await import("@opentelemetry/sdk-node");
  // The exporters read the endpoint, headers and timeout from the environment themselves.
  const traceExporter =
    protocol === "http/json"
      ? new (await import("@opentelemetry/exporter-trace-otlp-http")).OTLPTraceExporter()
      : new (await import("@opentelemetry/exporter-trace-otlp-proto")).OTLPTraceExporter();
  const sdk = new NodeSDK({
    serviceName: options.serviceName,
    traceExporter,
    // Traces only, unless the user asks for more: Jaeger (docker-compose.yml) takes no OTLP metrics or
    // logs, and the SDK's default would post both every minute.
    ...(env.OTEL_METRICS_EXPORTER ? {} : { metricReaders: [] }),
    ...(env.OTEL_LOGS_EXPORTER ? {} : { logRecordProcessors: [] }),
  });
  sdk.start();
  let stopping: Promise<void> | undefined;
  return {
    enabled: true,
    protocol,
    shutdown() {
      stopping ??= shutdownQuietly(sdk, endpoint, (line) => log(`${options.serviceName}: ${line}`));
      return stopping;
    },
  };
}

/** The trace protocol the environment asks for; gRPC is not bundled, so it falls back with a notice. */
export function otlpProtocol(
  env: Record<string, string | undefined>,
  log: (line: string) => void = () => {},
): OtlpProtocol {
  const asked = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || "").trim();
  if (asked === "" || asked === "http/protobuf") return "http/protobuf";
  if (asked === "http/json") return "http/json";
  log(`OTEL_EXPORTER_OTLP_PROTOCOL=${asked} is not supported here; exporting http/protobuf`);
  return "http/protobuf";
}

async function shutdownQuietly(sdk: NodeSDK, endpoint: string, log: (line: string) => void): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), SHUTDOWN_TIMEOUT_MS);
    timer.unref();
  });
  try {
    const result = await Promise.race([sdk.shutdown().then(() => "ok" as const), timedOut]);
    if (result === "timeout")
      log(`tracing: gave up flushing spans to ${endpoint} after ${SHUTDOWN_TIMEOUT_MS} ms`);
  } catch (error) {
    // A collector that refuses (down, wrong port) makes shutdown() reject; losing spans must not crash the exit.
    log(`tracing: spans not delivered to ${endpoint}: ${oneLine(error)}`);
  } finally {
    clearTimeout(timer);
  }
}

function oneLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split("\n")[0]?.slice(0, 200) ?? "";
}

function isTrue(value: string | undefined): boolean {
  return value?.trim().toLowerCase() === "true";
}
