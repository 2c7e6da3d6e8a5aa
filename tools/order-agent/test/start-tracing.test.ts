import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { runCommand } from "@once/support";
import { formatSpanTree, type OtlpReceiver, startOtlpReceiver } from "@once/trace-receiver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { otlpProtocol } from "../src/index.js";

const fixture = fileURLToPath(new URL("./fixtures/emit-spans.mjs", import.meta.url));
let receiver: OtlpReceiver;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
});
afterAll(async () => {
  await receiver.close();
});

/** Runs the fixture in its own process (one SDK per process, as in the apps). */
async function emit(service: string, env: Record<string, string | undefined>) {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("OTEL_")));
  const { code, stdout, stderr } = await runCommand(process.execPath, [fixture, service], {
    env: { ...clean, ...env },
  });
  return {
    code,
    stderr,
    line: JSON.parse(stdout) as { enabled: boolean; protocol?: string; traceId: string },
  };
}

describe("startTracing", () => {
  it.each(["http/json"] as const)("exports %s that the receiver decodes", async (protocol) => {
    const service = `svc-${protocol.replace("/", "-")}`;
    const { code, line } = await emit(service, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
    });
    expect(code).toBe(0);
    expect(line).toMatchObject({ enabled: true, protocol });
    const spans = receiver.spans.filter((span) => span.traceId === line.traceId);
    expect(spans.map((span) => [span.name, span.serviceName]).sort()).toEqual([
      ["child", service],
      ["root", service],
    ]);
    const root = spans.find((span) => span.name === "root");
    const child = spans.find((span) => span.name === "child");
    expect(root?.parentSpanId).toBeUndefined();
    expect(child?.parentSpanId).toBe(root?.spanId);
    expect(root?.attributes).toMatchObject({
      "a.string": "s",
      "a.int": 42,
      "a.bool": true,
      "a.double": 1.5,
      "a.list": ["x", "y"],
    });
    expect(child?.events).toMatchObject([
      { name: "once.dedup_hit", attributes: { "once.stored_state": "done" } },
    ]);
    expect(child && root && child.startTimeUnixNano >= root.startTimeUnixNano).toBe(true);
    expect(formatSpanTree(receiver.spans, line.traceId)).toMatch(
      /^trace \w{32} · 2 spans from svc.*\nroot .*\n└─ child .*⚑ once\.dedup_hit/,
    );
  });

  it("without an endpoint starts no SDK", async () => {
    const { code, line } = await emit("none", {});
    expect(code).toBe(0);
    expect(line.enabled).toBe(false);
  });

  it("exits cleanly with one line when the collector refuses the spans", async () => {
    const refusing = createServer((req, res) => {
      req.resume();
      req.on("end", () => res.writeHead(400, { "Content-Type": "text/plain" }).end("no"));
    });
    await new Promise<void>((resolve) => refusing.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = refusing.address() as AddressInfo;
      const { code, stderr, line } = await emit("refused", {
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      });
      expect(code).toBe(0);
      expect(line.enabled).toBe(true);
      expect(stderr.trim().split("\n")).toEqual([
        expect.stringMatching(/^refused: tracing: spans not delivered to http:/),
      ]);
    } finally {
      refusing.close();
    }
  });
});

describe("otlpProtocol", () => {
  it("defaults to http/protobuf, honours http/json, and falls back from grpc with a notice", () => {
    const notices: string[] = [];
    expect(otlpProtocol({})).toBe("http/protobuf");
    expect(otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" })).toBe("http/json");
    expect(
      otlpProtocol({
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf",
      }),
    ).toBe("http/protobuf");
    expect(otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }, (line) => notices.push(line))).toBe(
      "http/protobuf",
    );
    expect(notices).toHaveLength(1);
  });
});
