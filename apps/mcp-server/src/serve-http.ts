import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { McpHttpGuard } from "@once/mcp";

export interface HttpMcp {
  /** Where clients post: `http://HOST:PORT/mcp`. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Streamable HTTP at `/mcp`, stateless: each POST is served by a server of its own, so a restarted process
 * answers a client's next call without a session to resume — the step in the call is all the state there is.
 * On `guard.host`, port 0 picks a free one; every request passes the guard (Host, Origin, bearer token)
 * before anything of it runs.
 */
export async function serveHttp(
  newServer: () => Server,
  port: number,
  guard: McpHttpGuard,
): Promise<HttpMcp> {
  const { host } = guard;
  const http = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      process.stderr.write(`mcp-server: ${String(error)}\n`);
      if (!res.headersSent) reply(res, 500, "internal error");
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (new URL(req.url ?? "/", "http://mcp.invalid").pathname !== "/mcp")
      return reply(res, 404, "not found: use /mcp");
    // A web page whose name was rebound to this address, another site's page, a caller without the token:
    // answered here, before a server or transport exists for the request.
    const refused = guard.refusal(req);
    if (refused !== undefined) {
      res.writeHead(refused.status, refused.headers).end(refused.body);
      return;
    }
    // Stateless: no session to stream to (GET) or end (DELETE).
    if (req.method !== "POST") return reply(res, 405, "method not allowed: POST", { Allow: "POST" });
    const server = newServer();
    // One request, one JSON answer, no event stream: a server that dies mid-call fails the request at once
    // (a cut stream would have the client wait to resume it), and the client calls the step again.
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
      ...guard.transportOptions(req),
    });
    res.on("close", () => {
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  }

  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(port, host, () => {
      http.off("error", reject);
      resolve();
    });
  });
  const bound = (http.address() as AddressInfo).port;
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${bound}/mcp`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        http.close((error) => (error ? reject(error) : resolve()));
        http.closeAllConnections();
      }),
  };
}

function reply(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  // JSON-RPC's shape, as the SDK's own transport answers what it refuses.
  const body = JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null });
  res.writeHead(status, { ...headers, "Content-Type": "application/json" }).end(body);
}
