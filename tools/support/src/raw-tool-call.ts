// An MCP `tools/call` as one raw POST with the headers a test chooses, Host included: what a page or a script
// that is not an MCP client can send to a server's HTTP guard.

import { rawRequest } from "./raw-request.js";

/** A tool call: the tool's name, its arguments and the `_meta` it carries (a once step, say). */
export interface RawToolCall {
  name: string;
  arguments: Record<string, unknown>;
  _meta?: Record<string, unknown>;
}

/** What the guard or the server answered: the HTTP status, its `WWW-Authenticate`, its JSON-RPC error. */
export interface RawToolAnswer {
  status: number;
  authenticate?: string;
  message?: string;
}

/** `call` as a JSON-RPC `tools/call` POSTed to `url`, with exactly `host`, the MCP content types and `headers`. */
export async function rawToolCall(
  url: URL,
  call: RawToolCall,
  headers: Record<string, string> = {},
): Promise<RawToolAnswer> {
  const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: call });
  const contentType = { "Content-Type": "application/json", Accept: "application/json, text/event-stream" };
  const res = await rawRequest(
    url.origin,
    url.pathname,
    { host: url.host, ...contentType, ...headers },
    { method: "POST", body },
  );
  const answer = JSON.parse(res.body) as { error?: { message: string } };
  const authenticate = res.headers["www-authenticate"];
  return {
    status: res.status,
    ...(authenticate === undefined ? {} : { authenticate }),
    ...(answer.error === undefined ? {} : { message: answer.error.message }),
  };
}
