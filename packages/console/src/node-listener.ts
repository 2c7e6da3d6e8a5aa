import type { IncomingMessage, ServerResponse } from "node:http";
import type { TLSSocket } from "node:tls";
import type { ConsoleHandler } from "./create-console.js";

const MAX_BODY_BYTES = 4 * 1024 * 1024;

/**
 * A fetch handler as a node:http listener: for `http.createServer(...)`, or Express's `app.use("/once", …)`
 * (mount it before any body parser: it reads the body itself). The request's URL is built from its Host
 * header and `req.url`, which a mount has already stripped of its path; the console takes either.
 */
export function toNodeListener(
  handler: ConsoleHandler,
): (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void) => void {
  return (req, res, next) => {
    serve(handler, req, res).catch((error: unknown) => {
      if (next !== undefined) return next(error);
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain; charset=utf-8" });
      res.end("The console failed on this request.\n");
    });
  };
}

async function serve(handler: ConsoleHandler, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const protocol = (req.socket as TLSSocket).encrypted ? "https" : "http";
  let url: URL;
  try {
    url = new URL(req.url ?? "/", `${protocol}://${req.headers.host ?? "localhost"}`);
  } catch {
    // No URL can be made of this Host (a space, a stray character): bad input, answered as such, not a 500.
    res.writeHead(400, { "content-type": "text/plain; charset=utf-8", "x-content-type-options": "nosniff" });
    res.end(
      `Bad request: the Host header ${JSON.stringify(req.headers.host?.slice(0, 200))} is not a host.\n`,
    );
    return;
  }
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  const method = req.method ?? "GET";
  let body: Buffer | undefined;
  if (method !== "GET" && method !== "HEAD") {
    body = await readBody(req);
    if (body === undefined) {
      res.writeHead(413, { "content-type": "text/plain; charset=utf-8" }).end("Too large.\n");
      return;
    }
  }
  const response = await handler(new Request(url, { method, headers, ...(body ? { body } : {}) }));
  const cookies = response.headers.getSetCookie();
  response.headers.forEach((value, name) => {
    if (name !== "set-cookie") res.setHeader(name, value);
  });
  if (cookies.length > 0) res.setHeader("set-cookie", cookies);
  res.statusCode = response.status;
  res.end(Buffer.from(await response.arrayBuffer()));
}

/** The whole body, or undefined past the limit. A body something else already read counts as empty. */
async function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  if (req.readableEnded) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
