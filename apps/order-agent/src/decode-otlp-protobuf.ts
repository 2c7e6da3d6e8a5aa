import type { Attributes, AttributeValue, ReceivedEvent, ReceivedSpan } from "./received-span.js";

/**
 * Decodes an OTLP/HTTP protobuf `ExportTraceServiceRequest` (opentelemetry-proto, trace/v1).
 *
 * A hand decoder instead of protobufjs: this workspace does not run protobufjs's install script, the
 * OpenTelemetry packages here no longer ship a request decoder (only their own encoder), and the wire
 * format is four wire types plus the field numbers below, which the proto files freeze (OTLP is stable:
 * fields are never renumbered). Unknown fields are skipped, as protobuf requires.
 */
export function decodeOtlpProtobuf(body: Uint8Array): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  // ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
  for (const field of fields(body)) {
    if (field.number === 1) spans.push(...resourceSpans(bytesOf(field)));
  }
  return spans;
}

type Field =
  | { number: number; wire: 0; value: bigint }
  | { number: number; wire: 1; value: Uint8Array }
  | { number: number; wire: 2; value: Uint8Array }
  | { number: number; wire: 5; value: Uint8Array };

/** ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; } */
function resourceSpans(buffer: Uint8Array): ReceivedSpan[] {
  let resource: Attributes = {};
  const scopes: Uint8Array[] = [];
  for (const field of fields(buffer)) {
    // Resource { repeated KeyValue attributes = 1; }
    if (field.number === 1) resource = attributesOf(bytesOf(field), 1);
    else if (field.number === 2) scopes.push(bytesOf(field));
  }
  const serviceName = typeof resource["service.name"] === "string" ? resource["service.name"] : undefined;
  const spans: ReceivedSpan[] = [];
  for (const scope of scopes) {
    // ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
    let scopeName: string | undefined;
    const raw: Uint8Array[] = [];
    for (const field of fields(scope)) {
      if (field.number === 1) {
        // InstrumentationScope { string name = 1; string version = 2; … }
        for (const inner of fields(bytesOf(field))) if (inner.number === 1) scopeName = text(bytesOf(inner));
      } else if (field.number === 2) raw.push(bytesOf(field));
    }
    for (const span of raw) spans.push(spanOf(span, serviceName, scopeName));
  }
  return spans;
}

/**
 * Span { bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4;
 *   string name = 5; SpanKind kind = 6; fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8;
 *   repeated KeyValue attributes = 9; repeated Event events = 11; repeated Link links = 13;
 *   Status status = 15; }
 */
function spanOf(
  buffer: Uint8Array,
  serviceName: string | undefined,
  scope: string | undefined,
): ReceivedSpan {
  const span: ReceivedSpan = {
    traceId: "",
    spanId: "",
    parentSpanId: undefined,
    name: "",
    kind: 0,
    startTimeUnixNano: 0n,
    endTimeUnixNano: 0n,
    serviceName,
    scope,
    attributes: {},
    events: [],
    links: [],
    status: { code: 0, message: undefined },
  };
  for (const field of fields(buffer)) {
    switch (field.number) {
      case 1:
        span.traceId = hex(bytesOf(field));
        break;
      case 2:
        span.spanId = hex(bytesOf(field));
        break;
      case 4: {
        const parent = hex(bytesOf(field));
        span.parentSpanId = parent === "" || /^0+$/.test(parent) ? undefined : parent;
        break;
      }
      case 5:
        span.name = text(bytesOf(field));
        break;
      case 6:
        span.kind = Number(varintOf(field));
        break;
      case 7:
        span.startTimeUnixNano = fixed64(field);
        break;
      case 8:
        span.endTimeUnixNano = fixed64(field);
        break;
      case 9:
        Object.assign(span.attributes, keyValue(bytesOf(field)));
        break;
      case 11:
        span.events.push(eventOf(bytesOf(field)));
        break;
      case 13:
        span.links.push(linkOf(bytesOf(field)));
        break;
      case 15:
        span.status = statusOf(bytesOf(field));
        break;
    }
  }
  return span;
}

/** Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3; } */
function eventOf(buffer: Uint8Array): ReceivedEvent {
  const event: ReceivedEvent = { name: "", timeUnixNano: 0n, attributes: {} };
  for (const field of fields(buffer)) {
    if (field.number === 1) event.timeUnixNano = fixed64(field);
    else if (field.number === 2) event.name = text(bytesOf(field));
    else if (field.number === 3) Object.assign(event.attributes, keyValue(bytesOf(field)));
  }
  return event;
}

/** Link { bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; repeated KeyValue attributes = 4; } */
function linkOf(buffer: Uint8Array): ReceivedSpan["links"][number] {
  const link = { traceId: "", spanId: "", attributes: {} as Attributes };
  for (const field of fields(buffer)) {
    if (field.number === 1) link.traceId = hex(bytesOf(field));
    else if (field.number === 2) link.spanId = hex(bytesOf(field));
    else if (field.number === 4) Object.assign(link.attributes, keyValue(bytesOf(field)));
  }
  return link;
}

/** Status { string message = 2; StatusCode code = 3; } */
function statusOf(buffer: Uint8Array): ReceivedSpan["status"] {
  const status: ReceivedSpan["status"] = { code: 0, message: undefined };
  for (const field of fields(buffer)) {
    if (field.number === 2) status.message = text(bytesOf(field)) || undefined;
    else if (field.number === 3) status.code = Number(varintOf(field));
  }
  return status;
}

/** Every `repeated KeyValue` with field number `number` in a message, as one object. */
function attributesOf(buffer: Uint8Array, number: number): Attributes {
  const out: Attributes = {};
  for (const field of fields(buffer))
    if (field.number === number) Object.assign(out, keyValue(bytesOf(field)));
  return out;
}

/** KeyValue { string key = 1; AnyValue value = 2; } */
function keyValue(buffer: Uint8Array): Attributes {
  let key = "";
  let value: AttributeValue = null;
  for (const field of fields(buffer)) {
    if (field.number === 1) key = text(bytesOf(field));
    else if (field.number === 2) value = anyValue(bytesOf(field));
  }
  return { [key]: value };
}

/**
 * AnyValue { oneof: string string_value = 1; bool bool_value = 2; int64 int_value = 3;
 *   double double_value = 4; ArrayValue array_value = 5; KeyValueList kvlist_value = 6; bytes bytes_value = 7; }
 * ArrayValue { repeated AnyValue values = 1; }  KeyValueList { repeated KeyValue values = 1; }
 */
function anyValue(buffer: Uint8Array): AttributeValue {
  let value: AttributeValue = null;
  for (const field of fields(buffer)) {
    switch (field.number) {
      case 1:
        value = text(bytesOf(field));
        break;
      case 2:
        value = varintOf(field) !== 0n;
        break;
      case 3:
        value = Number(BigInt.asIntN(64, varintOf(field)));
        break;
      case 4:
        value = Buffer.from(bytesOfFixed(field)).readDoubleLE(0);
        break;
      case 5:
        value = [...fields(bytesOf(field))].filter((f) => f.number === 1).map((f) => anyValue(bytesOf(f)));
        break;
      case 6:
        value = attributesOf(bytesOf(field), 1);
        break;
      case 7:
        value = Buffer.from(bytesOf(field)).toString("base64");
        break;
    }
  }
  return value;
}

/** The fields of one message, in order; throws on a truncated or malformed buffer. */
function* fields(buffer: Uint8Array): Generator<Field> {
  let at = 0;
  while (at < buffer.length) {
    const [tag, afterTag] = varint(buffer, at);
    at = afterTag;
    const number = Number(tag >> 3n);
    const wire = Number(tag & 7n);
    if (number === 0) throw new Error("protobuf: field number 0");
    if (wire === 0) {
      const [value, next] = varint(buffer, at);
      at = next;
      yield { number, wire, value };
    } else if (wire === 1 || wire === 5) {
      const size = wire === 1 ? 8 : 4;
      if (at + size > buffer.length) throw new Error("protobuf: truncated fixed-width field");
      yield { number, wire, value: buffer.subarray(at, at + size) };
      at += size;
    } else if (wire === 2) {
      const [length, next] = varint(buffer, at);
      const end = next + Number(length);
      if (end > buffer.length) throw new Error("protobuf: truncated length-delimited field");
      yield { number, wire, value: buffer.subarray(next, end) };
      at = end;
    } else {
      throw new Error(`protobuf: unsupported wire type ${wire}`);
    }
  }
}

function varint(buffer: Uint8Array, start: number): [bigint, number] {
  let result = 0n;
  let shift = 0n;
  for (let at = start; at < buffer.length && shift < 70n; at++) {
    const byte = buffer[at] as number;
    result |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return [result, at + 1];
    shift += 7n;
  }
  throw new Error("protobuf: truncated varint");
}

function bytesOf(field: Field): Uint8Array {
  if (field.wire !== 2) throw new Error(`protobuf: field ${field.number} is not length-delimited`);
  return field.value;
}

function bytesOfFixed(field: Field): Uint8Array {
  if (field.wire !== 1) throw new Error(`protobuf: field ${field.number} is not fixed64`);
  return field.value;
}

function varintOf(field: Field): bigint {
  if (field.wire !== 0) throw new Error(`protobuf: field ${field.number} is not a varint`);
  return field.value;
}

function fixed64(field: Field): bigint {
  return Buffer.from(bytesOfFixed(field)).readBigUInt64LE(0);
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("hex");
}

function text(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("utf8");
}
