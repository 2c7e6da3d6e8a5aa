import type { Attributes, AttributeValue, ReceivedEvent, ReceivedSpan } from "./received-span.js";

/**
 * Decodes an OTLP/HTTP JSON `ExportTraceServiceRequest`. Ids are hex per the OTLP JSON mapping; base64 is
 * accepted too (some SDKs send it). 64-bit numbers may come as strings or numbers.
 */
export function decodeOtlpJson(body: string | Uint8Array): ReceivedSpan[] {
  const text = typeof body === "string" ? body : new TextDecoder().decode(body);
  const request = JSON.parse(text) as { resourceSpans?: JsonResourceSpans[] };
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of request.resourceSpans ?? []) {
    const resource = attributes(resourceSpans.resource?.attributes);
    const serviceName = typeof resource["service.name"] === "string" ? resource["service.name"] : undefined;
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        const parent = span.parentSpanId ? id(span.parentSpanId, 8) : "";
        spans.push({
          traceId: id(span.traceId, 16),
          spanId: id(span.spanId, 8),
          parentSpanId: parent === "" || /^0+$/.test(parent) ? undefined : parent,
          name: span.name ?? "",
          kind: Number(span.kind ?? 0),
          startTimeUnixNano: BigInt(span.startTimeUnixNano ?? 0),
          endTimeUnixNano: BigInt(span.endTimeUnixNano ?? 0),
          serviceName,
          scope: scopeSpans.scope?.name,
          attributes: attributes(span.attributes),
          events: (span.events ?? []).map(
            (event): ReceivedEvent => ({
              name: event.name ?? "",
              timeUnixNano: BigInt(event.timeUnixNano ?? 0),
              attributes: attributes(event.attributes),
            }),
          ),
          links: (span.links ?? []).map((link) => ({
            traceId: id(link.traceId, 16),
            spanId: id(link.spanId, 8),
            attributes: attributes(link.attributes),
          })),
          status: { code: Number(span.status?.code ?? 0), message: span.status?.message || undefined },
        });
      }
    }
  }
  return spans;
}

interface JsonKeyValue {
  key: string;
  value?: JsonAnyValue;
}

interface JsonAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: JsonAnyValue[] };
  kvlistValue?: { values?: JsonKeyValue[] };
  bytesValue?: string;
}

interface JsonSpan {
  traceId?: string;
  spanId?: string;
  parentSpanId?: string;
  name?: string;
  kind?: number;
  startTimeUnixNano?: string | number;
  endTimeUnixNano?: string | number;
  attributes?: JsonKeyValue[];
  events?: { timeUnixNano?: string | number; name?: string; attributes?: JsonKeyValue[] }[];
  links?: { traceId?: string; spanId?: string; attributes?: JsonKeyValue[] }[];
  status?: { code?: number; message?: string };
}

interface JsonResourceSpans {
  resource?: { attributes?: JsonKeyValue[] };
  scopeSpans?: { scope?: { name?: string }; spans?: JsonSpan[] }[];
}

function attributes(list: JsonKeyValue[] | undefined): Attributes {
  const out: Attributes = {};
  for (const { key, value } of list ?? []) out[key] = anyValue(value);
  return out;
}

function anyValue(value: JsonAnyValue | undefined): AttributeValue {
  if (value === undefined) return null;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(anyValue);
  if (value.kvlistValue !== undefined) return attributes(value.kvlistValue.values);
  if (value.bytesValue !== undefined) return value.bytesValue;
  return null;
}

/** A span or trace id as lowercase hex, from hex or base64. */
function id(value: string | undefined, bytes: number): string {
  if (!value) return "";
  if (value.length === bytes * 2 && /^[0-9a-fA-F]+$/.test(value)) return value.toLowerCase();
  return Buffer.from(value, "base64").toString("hex");
}
