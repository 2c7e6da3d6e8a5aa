import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync, inflateSync } from "node:zlib";
import { decodeOtlpJson } from "./decode-otlp-json.js";
import type { ReceivedSpan } from "./received-span.js";

export interface OtlpReceiverOptions {
  /** Default 0: a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
}

export interface OtlpReceiver {
  /** Base URL to use as `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  readonly url: string;
  /** Every span received so far, in arrival order. */
  readonly spans: readonly ReceivedSpan[];
  /** How many trace requests arrived: decoded, or refused (not JSON, or not decodable). */
  readonly requests: { json: number; rejected: number };
  /** Resolves with the spans once `predicate` holds for them; rejects after `timeoutMs`. */
  waitFor(
    predicate: (spans: readonly ReceivedSpan[]) => boolean,
    timeoutMs?: number,
  ): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 32 << 20;

/**
 * A minimal OTLP/HTTP collector in this process: `POST /v1/traces` as JSON (gzip or not), decoded into
 * spans kept in memory; protobuf is refused with 415, so exporters pointed here are set to `http/json`.
 * `/v1/metrics` and `/v1/logs` are accepted and dropped. For tests and the demo's `--trace`, where there is
 * no Jaeger.
 */
export async function startOtlpReceiver(options: OtlpReceiverOptions = {}): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests = { json: 0, rejected: 0 };
  const watchers = new Set<() => void>();

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? "/", "http://receiver.invalid").pathname;
    if (req.method !== "POST") return reply(res, 405, "text/plain", "POST only");
    if (path === "/v1/metrics" || path === "/v1/logs") {
      await body(req);
      return reply(res, 200, "application/json", "{}");
    }
    if (path !== "/v1/traces") return reply(res, 404, "text/plain", `no route for ${path}`);
    const raw = inflate(await body(req), req.headers["content-encoding"]);
    const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim();
    try {
      if (type === "application/json") {
        spans.push(...decodeOtlpJson(raw));
        requests.json++;
        reply(res, 200, "application/json", "{}");
      } else {
        requests.rejected++;
        return reply(res, 415, "text/plain", `unsupported content-type ${type}`);
      }
    } catch (error) {
      requests.rejected++;
      return reply(res, 400, "text/plain", `cannot decode: ${(error as Error).message}`);
    }
    for (const wake of watchers) wake();
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) reply(res, 500, "text/plain", String(error));
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host ?? "127.0.0.1";

  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${port}`,
    spans,
    requests,
    waitFor(predicate, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!predicate(spans)) return;
          done();
          resolve([...spans]);
        };
        const timer = setTimeout(() => {
          done();
          reject(
            new Error(`the spans wanted did not arrive within ${timeoutMs} ms (${spans.length} received)`),
          );
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          watchers.delete(check);
        };
        watchers.add(check);
        check();
      });
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

async function body(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new Error(`body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function inflate(raw: Buffer, encoding: string | undefined): Buffer {
  if (encoding === "gzip") return gunzipSync(raw);
  if (encoding === "deflate") return inflateSync(raw);
  return raw;
}

function reply(res: ServerResponse, status: number, type: string, text: string): void {
  res.writeHead(status, { "Content-Type": type, "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}
