import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createLatencySampler, DEFAULT_LATENCY, type LatencyConfig } from "./latency.js";
import { Ledger } from "./ledger.js";
import { EFFECT_KINDS, type EffectKind, type EffectQuery, type LedgerSnapshot } from "./types.js";
import { validateInput } from "./validate-input.js";

export interface PaymentsServerOptions {
  /** 0 (the default) picks a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default `{ p50Ms: 50, p99Ms: 2000 }`; `X-Latency-Ms` overrides it per request. */
  latency?: LatencyConfig;
  /** Default false: most of the point is showing that `once` protects a provider that ignores keys. */
  honourIdempotencyKey?: boolean;
  /** Seeds the latency sampler so runs are reproducible; random by default. */
  seed?: number;
}

export interface PaymentsServer {
  readonly url: string;
  readonly port: number;
  /** The same counts as `GET /ledger`, without HTTP. */
  ledger(): LedgerSnapshot;
  /** The same as `POST /reset`. */
  reset(): void;
  /** Stops listening and drops connections, including answers still waiting out their latency. */
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 1 << 20;

/** Starts the provider stand-in on a real HTTP port; resolves once it is listening. */
export async function startPaymentsServer(options: PaymentsServerOptions = {}): Promise<PaymentsServer> {
  const { port = 0, host = "127.0.0.1", honourIdempotencyKey = false } = options;
  const sampleLatencyMs = createLatencySampler(options.latency ?? DEFAULT_LATENCY, options.seed);
  const ledger = new Ledger();
  const pendingTimers = new Set<NodeJS.Timeout>();

  // Answers wait out their latency on timers that close() clears, so a test never waits for a 2 s tail.
  function wait(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        pendingTimers.delete(timer);
        resolve();
      }, ms);
      pendingTimers.add(timer);
    });
  }

  async function acceptEffect(kind: EffectKind, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const fail = req.headers["x-fail"];
    if (fail !== undefined && fail !== "before" && fail !== "after") {
      return sendJson(res, 400, { error: `X-Fail must be 'before' or 'after', got '${fail}'` });
    }
    const latencyHeader = req.headers["x-latency-ms"];
    const latencyOverride = latencyHeader === undefined ? undefined : Number(latencyHeader);
    if (latencyOverride !== undefined && !(Number.isSafeInteger(latencyOverride) && latencyOverride >= 0)) {
      return sendJson(res, 400, {
        error: `X-Latency-Ms must be a non-negative integer, got '${latencyHeader}'`,
      });
    }
    const body = await readJson(req);
    if (!body.ok) return sendJson(res, body.status, { error: body.error });
    const input = validateInput(kind, body.value);
    if (!input.ok) return sendJson(res, 400, { error: input.error });
    // Sampled only for accepted requests, so a seed gives the same latencies whatever bad requests came in.
    const latencyMs = latencyOverride ?? sampleLatencyMs();

    // Refusals about the request's content (400, 409) come at once; answers about the effect wait the latency.
    if (fail === "before") {
      await wait(latencyMs);
      return sendJson(res, 503, { error: "refused before acting (X-Fail: before); nothing was recorded" });
    }
    const key = honourIdempotencyKey ? req.headers["idempotency-key"] : undefined;
    // Recorded NOW, before the latency: a client that gives up waiting has still been charged.
    const result = ledger.record(kind, input.value, typeof key === "string" && key !== "" ? key : undefined);
    if (result.outcome === "key_reused") return sendJson(res, 409, { error: result.error });
    await wait(latencyMs);
    // "Failed during the effect": the effect happened, but the client never hears so.
    if (fail === "after") return void req.socket.destroy();
    if (result.outcome === "replayed") {
      return sendJson(res, 200, result.record, { "Idempotent-Replayed": "true" });
    }
    sendJson(res, 201, result.record);
  }

  function search(kind: EffectKind, url: URL, res: ServerResponse): void {
    const query: EffectQuery & { metadata: Record<string, string> } = { metadata: {} };
    for (const [name, value] of url.searchParams) {
      if (name === "orderId") query.orderId = value;
      else if (name.startsWith("metadata.") && name.length > "metadata.".length) {
        query.metadata[name.slice("metadata.".length)] = value;
      } else {
        sendJson(res, 400, { error: `unknown query parameter '${name}' (use orderId or metadata.<key>)` });
        return;
      }
    }
    sendJson(res, 200, { data: ledger.find(kind, query) });
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://provider.invalid");
    const path = url.pathname.replace(/\/+$/, "") || "/";
    const kind = EFFECT_KINDS.find((k) => path === `/${k}`);
    const allowed =
      kind !== undefined ? ["GET", "POST"] : path === "/ledger" ? ["GET"] : path === "/reset" ? ["POST"] : [];
    if (allowed.length === 0) return sendJson(res, 404, { error: `no route for ${path}` });
    if (!allowed.includes(req.method ?? "")) {
      return sendJson(
        res,
        405,
        { error: `${req.method} not allowed on ${path}` },
        { Allow: allowed.join(", ") },
      );
    }
    if (kind !== undefined)
      return req.method === "POST" ? acceptEffect(kind, req, res) : search(kind, url, res);
    if (path === "/ledger") return sendJson(res, 200, ledger.snapshot());
    ledger.reset();
    res.writeHead(204).end();
  }

  const server = createServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: `internal error: ${String(error)}` });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port: boundPort } = server.address() as AddressInfo;
  const urlHost = host.includes(":") ? `[${host}]` : host;

  return {
    url: `http://${urlHost}:${boundPort}`,
    port: boundPort,
    ledger: () => ledger.snapshot(),
    reset: () => ledger.reset(),
    close: () =>
      new Promise<void>((resolve, reject) => {
        for (const timer of pendingTimers) clearTimeout(timer);
        pendingTimers.clear();
        server.close((error) => (error ? reject(error) : resolve()));
        // Keep-alive sockets from fetch, and answers still pending, would otherwise hold close() open.
        server.closeAllConnections();
      }),
  };
}

type BodyResult = { ok: true; value: unknown } | { ok: false; status: number; error: string };

async function readJson(req: IncomingMessage): Promise<BodyResult> {
  const chunks: Buffer[] = [];
  let size = 0;
  // An oversized body is drained, not stored: leaving the loop early would destroy the socket before the 413.
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  }
  if (size > MAX_BODY_BYTES) return { ok: false, status: 413, error: `body exceeds ${MAX_BODY_BYTES} bytes` };
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") return { ok: false, status: 400, error: "body is empty; expected a JSON object" };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false, status: 400, error: "body is not valid JSON" };
  }
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  // The client may have hung up while the answer waited; there is nobody left to tell.
  if (res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(text),
  });
  res.end(text);
}
