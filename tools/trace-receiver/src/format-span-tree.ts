import { type AttributeValue, type ReceivedSpan, SPAN_KIND } from "./received-span.js";

// The attributes worth a glance in a terminal; the rest are in Jaeger.
const SHOWN_ATTRIBUTES: readonly [string, string][] = [
  ["once.outcome", "outcome"],
  ["once.attempt", "attempt"],
  ["once.fence", "fence"],
  ["once.enqueues", "enqueues"],
  ["once.replayed", "replayed"],
  ["once.applied", "applied"],
  ["error.type", "error"],
];

const KIND_NAMES: Record<number, string> = {
  [SPAN_KIND.producer]: "producer",
  [SPAN_KIND.consumer]: "consumer",
  [SPAN_KIND.client]: "client",
  [SPAN_KIND.server]: "server",
};

/**
 * One trace as an indented tree for a terminal: each span with its service, start offset, duration,
 * a few once attributes, its events (×count) and links. Spans whose parent never arrived (a SIGKILLed
 * process loses the spans it had not exported) are listed as extra roots, marked so.
 */
export function formatSpanTree(spans: readonly ReceivedSpan[], traceId: string): string {
  const inTrace = spans.filter((span) => span.traceId === traceId);
  if (inTrace.length === 0) return `trace ${traceId}: no spans received`;
  const byId = new Map(inTrace.map((span) => [span.spanId, span]));
  const children = new Map<string, ReceivedSpan[]>();
  const roots: ReceivedSpan[] = [];
  for (const span of inTrace) {
    if (span.parentSpanId && byId.has(span.parentSpanId)) {
      const list = children.get(span.parentSpanId) ?? [];
      list.push(span);
      children.set(span.parentSpanId, list);
    } else roots.push(span);
  }
  const byStart = (a: ReceivedSpan, b: ReceivedSpan) => (a.startTimeUnixNano < b.startTimeUnixNano ? -1 : 1);
  roots.sort(byStart);
  // The earliest start of any span: clocks of different processes can put a child before its parent.
  let origin = inTrace[0]?.startTimeUnixNano ?? 0n;
  for (const span of inTrace) if (span.startTimeUnixNano < origin) origin = span.startTimeUnixNano;
  const services = [...new Set(inTrace.map((span) => span.serviceName ?? "?"))].join(", ");

  const rows: { label: string; service: string; start: string; duration: string; notes: string }[] = [];
  const walk = (span: ReceivedSpan, lead: string, branch: string) => {
    const kind = KIND_NAMES[span.kind];
    const orphan = span.parentSpanId && !byId.has(span.parentSpanId) ? " (parent not received)" : "";
    rows.push({
      label: `${lead}${branch}${span.name}${kind ? ` (${kind})` : ""}${orphan}`,
      service: span.serviceName ?? "?",
      start: `+${ms(span.startTimeUnixNano - origin)}`,
      duration: ms(span.endTimeUnixNano - span.startTimeUnixNano),
      notes: notes(span),
    });
    const list = (children.get(span.spanId) ?? []).sort(byStart);
    const nextLead = lead + (branch === "" ? "" : branch === "└─ " ? "   " : "│  ");
    for (const [index, child] of list.entries()) {
      walk(child, nextLead, index === list.length - 1 ? "└─ " : "├─ ");
    }
  };
  for (const root of roots) walk(root, "", "");

  const width = (pick: (row: (typeof rows)[number]) => string) =>
    Math.max(...rows.map((row) => pick(row).length));
  const labelWidth = width((row) => row.label);
  const serviceWidth = width((row) => row.service);
  const startWidth = width((row) => row.start);
  const durationWidth = width((row) => row.duration);
  const lines = rows.map((row) =>
    [
      row.label.padEnd(labelWidth),
      row.service.padEnd(serviceWidth),
      row.start.padStart(startWidth),
      row.duration.padStart(durationWidth),
      row.notes,
    ]
      .join("  ")
      .trimEnd(),
  );
  return [`trace ${traceId} · ${inTrace.length} spans from ${services}`, ...lines].join("\n");
}

function notes(span: ReceivedSpan): string {
  const parts: string[] = [];
  for (const [name, label] of SHOWN_ATTRIBUTES) {
    const value = span.attributes[name];
    if (value !== undefined && value !== null) parts.push(`${label}=${show(value)}`);
  }
  const counts = new Map<string, number>();
  for (const event of span.events) counts.set(event.name, (counts.get(event.name) ?? 0) + 1);
  for (const [name, count] of counts) parts.push(count > 1 ? `⚑ ${name}×${count}` : `⚑ ${name}`);
  for (const link of span.links) {
    const why = link.attributes["once.link"];
    parts.push(`↪ ${typeof why === "string" ? why : "link"} ${link.spanId}`);
  }
  if (span.status.code === 2) parts.push("✗ ERROR");
  return parts.join(" ");
}

function show(value: AttributeValue): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

function ms(nanos: bigint): string {
  const value = Number(nanos) / 1e6;
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ms`;
}
