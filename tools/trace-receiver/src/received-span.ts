/** An attribute value as OTLP carries it. */
export type AttributeValue =
  | string
  | number
  | boolean
  | null
  | AttributeValue[]
  | { [key: string]: AttributeValue };

export type Attributes = Record<string, AttributeValue>;

/** OTLP span kinds. */
export const SPAN_KIND = {
  unspecified: 0,
  internal: 1,
  server: 2,
  client: 3,
  producer: 4,
  consumer: 5,
} as const;

export interface ReceivedEvent {
  name: string;
  timeUnixNano: bigint;
  attributes: Attributes;
}

/** One span as an OTLP receiver decoded it, with its resource's `service.name` copied onto it. */
export interface ReceivedSpan {
  /** 32 lowercase hex characters. */
  traceId: string;
  /** 16 lowercase hex characters. */
  spanId: string;
  /** Undefined for a root span. */
  parentSpanId: string | undefined;
  name: string;
  /** One of {@link SPAN_KIND}. */
  kind: number;
  startTimeUnixNano: bigint;
  endTimeUnixNano: bigint;
  serviceName: string | undefined;
  /** The instrumentation scope's name, e.g. `@once/bullmq`. */
  scope: string | undefined;
  attributes: Attributes;
  events: ReceivedEvent[];
  links: { traceId: string; spanId: string; attributes: Attributes }[];
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string | undefined };
}
