// McpHttpGuard in front of the SDK's StreamableHTTPServerTransport on a real HTTP server, as a user serving
// once tools over HTTP would put it: a refused request charges nothing at the payments stand-in, an
// admitted one is the SDK's own client calling once.

import { createServer, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { rawToolCall } from "@once/support";
import { afterEach, describe, expect, it } from "vitest";
import {
  callOnceTool,
  isLoopbackHost,
  McpHttpGuard,
  type McpHttpGuardOptions,
  onceMcpServer,
} from "../src/index.js";
import { orderTools } from "./tools.js";
import { chargesOf, payments, store, useMcpWorld } from "./world.js";

useMcpWorld("mcp-http");

const TOKEN = "a-token-of-24-characters";
const servers: HttpServer[] = [];
const clients: Client[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
  for (const http of servers.splice(0)) {
    http.closeAllConnections();
    http.close();
  }
});

/**
 * Once tools over Streamable HTTP behind a guard, on 127.0.0.1 whatever the guard's host. `sdkOnly` skips
 * `refusal`, leaving only the transport's own check, turned on by `transportOptions`.
 */
async function serve(options: McpHttpGuardOptions, { sdkOnly = false } = {}): Promise<URL> {
  const guard = new McpHttpGuard(options);
  const tools = orderTools(payments.url).all;
  const http = createServer(async (req, res) => {
    const refused = sdkOnly ? undefined : guard.refusal(req);
    if (refused !== undefined) return void res.writeHead(refused.status, refused.headers).end(refused.body);
    const server = onceMcpServer({ name: "once-test", version: "0.0.0", store, tools });
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
      ...guard.transportOptions(req),
    });
    res.on("close", () => void server.close());
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  servers.push(http);
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return new URL(`http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`);
}

let serial = 0;
const newOrder = () => `order-http-${process.pid}-${++serial}`;

/**
 * A `tools/call` of charge_customer with a valid step, as one raw POST carrying `headers` (node:http, since
 * fetch cannot set Host).
 */
function rawCharge(url: URL, orderId: string, headers: Record<string, string> = {}) {
  const call = {
    name: "charge_customer",
    arguments: { orderId, amount: 1200 },
    _meta: { "once/step": { taskId: `task-${orderId}`, stepId: "charge" } },
  };
  return rawToolCall(url, call, headers);
}

/** The SDK's client sending `headers` with every request, calling charge_customer twice with one step. */
async function chargeTwice(url: URL, orderId: string, headers: Record<string, string>) {
  const client = new Client({ name: "once-test-client", version: "0.0.0" });
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));
  clients.push(client);
  const step = { taskId: `task-${orderId}`, stepId: "charge" };
  const first = await callOnceTool(client, "charge_customer", { orderId, amount: 1200 }, step);
  const second = await callOnceTool(client, "charge_customer", { orderId, amount: 1200 }, step);
  expect(first.isError).toBeUndefined();
  expect(second.structuredContent).toEqual(first.structuredContent);
}

describe("Origin", () => {
  it("by default: another site's origin is refused, 403 naming it, nothing runs; the server's own loopback origin calls once", async () => {
    const url = await serve({ host: "127.0.0.1" });
    for (const origin of ["http://evil.example", `http://evil.example:${url.port}`, "http://localhost:1"]) {
      const orderId = newOrder();
      const refused = await rawCharge(url, orderId, { Origin: origin });
      expect(refused).toMatchObject({
        status: 403,
        message: `origin ${origin} refused: not an origin this server answers`,
      });
      expect(chargesOf(orderId)).toBe(0);
    }
    const orderId = newOrder();
    await chargeTwice(url, orderId, { Origin: `http://localhost:${url.port}` });
    expect(chargesOf(orderId)).toBe(1);
  });

  it("allowedOrigins: the origins listed are served, the loopback default is not", async () => {
    const url = await serve({ host: "127.0.0.1", allowedOrigins: ["https://Agent.example:443/"] });
    const refusedId = newOrder();
    expect(await rawCharge(url, refusedId, { Origin: `http://localhost:${url.port}` })).toMatchObject({
      status: 403,
    });
    expect(chargesOf(refusedId)).toBe(0);
    const orderId = newOrder();
    await chargeTwice(url, orderId, { Origin: "https://agent.example" });
    expect(chargesOf(orderId)).toBe(1);
  });

  it("the SDK transport's own check, turned on by transportOptions, refuses on its own too", async () => {
    const url = await serve({ host: "127.0.0.1" }, { sdkOnly: true });
    const orderId = newOrder();
    expect(await rawCharge(url, orderId, { Origin: "http://evil.example" })).toMatchObject({
      status: 403,
      message: "Invalid Origin header: http://evil.example",
    });
    expect(chargesOf(orderId)).toBe(0);
  });
});

describe("Host", () => {
  it("a loopback host answers loopback names on any port; another name is refused, 403 naming it, nothing runs", async () => {
    const url = await serve({ host: "127.0.0.1" });
    const unknown = "not a name this server answers";
    for (const [host, message] of [
      ["evil.example", `host evil.example refused: ${unknown}`],
      [`evil.example:${url.port}`, `host evil.example refused: ${unknown}`],
      ["localhost.evil.example", `host localhost.evil.example refused: ${unknown}`],
      ["127.0.0.1@evil.example", 'host "127.0.0.1@evil.example" refused: not a host name'],
    ] as const) {
      const orderId = newOrder();
      expect(await rawCharge(url, orderId, { Host: host })).toMatchObject({ status: 403, message });
      expect(chargesOf(orderId)).toBe(0);
    }
    for (const host of ["localhost:9000", "127.0.0.2", `[::1]:${url.port}`]) {
      const orderId = newOrder();
      expect(await rawCharge(url, orderId, { Host: host })).toMatchObject({ status: 200 });
      expect(chargesOf(orderId)).toBe(1);
    }
  });

  it("allowedHosts: on a host that is not loopback, only the names listed", async () => {
    const url = await serve({ host: "0.0.0.0", token: TOKEN, allowedHosts: ["MCP.internal"] });
    const authorization = `Bearer ${TOKEN}`;
    const refusedId = newOrder();
    expect(
      await rawCharge(url, refusedId, { Host: "localhost", Authorization: authorization }),
    ).toMatchObject({
      status: 403,
      message: "host localhost refused: not a name this server answers",
    });
    expect(chargesOf(refusedId)).toBe(0);
    const orderId = newOrder();
    expect(
      await rawCharge(url, orderId, { Host: "mcp.internal:8443", Authorization: authorization }),
    ).toMatchObject({
      status: 200,
    });
    expect(chargesOf(orderId)).toBe(1);
  });
});

describe("a bearer token", () => {
  it("missing or wrong: 401 with WWW-Authenticate: Bearer, nothing runs; the right one calls once", async () => {
    const url = await serve({ host: "0.0.0.0", token: TOKEN });
    const missing = newOrder();
    expect(await rawCharge(url, missing, {})).toEqual({
      status: 401,
      authenticate: "Bearer",
      message: "a bearer token is required: send Authorization: Bearer <token>",
    });
    const wrong = newOrder();
    for (const authorization of [`Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(1)}`, `Basic ${TOKEN}`, TOKEN])
      expect((await rawCharge(url, wrong, { Authorization: authorization })).status).toBe(401);
    expect(chargesOf(missing) + chargesOf(wrong)).toBe(0);
    const orderId = newOrder();
    await chargeTwice(url, orderId, { Authorization: `Bearer ${TOKEN}` });
    expect(chargesOf(orderId)).toBe(1);
  });
});

describe("construction", () => {
  it("a host that is not loopback without a token: refused, unless insecureNoAuth", () => {
    expect(() => new McpHttpGuard({ host: "0.0.0.0" })).toThrow(
      /^host 0\.0\.0\.0 is not a loopback address, so anyone who can reach the port could call the tools: give a token/,
    );
    expect(() => new McpHttpGuard({ host: "::" })).toThrow(RangeError);
    expect(new McpHttpGuard({ host: "0.0.0.0", insecureNoAuth: true }).unauthenticated).toBe(true);
    expect(new McpHttpGuard({ host: "0.0.0.0", token: TOKEN }).unauthenticated).toBe(false);
    expect(new McpHttpGuard({ host: "127.0.0.1" }).unauthenticated).toBe(false);
  });

  it.each([
    ["a token and insecureNoAuth", { token: TOKEN, insecureNoAuth: true }, /not both/],
    ["a short token", { token: "short" }, /16 characters or more/],
    ["a token with a space", { token: "with a space in it, 24" }, /printable ASCII with no spaces/],
    ["a host with a port", { allowedHosts: ["mcp.example:8080"] }, /"mcp\.example:8080" is not a host name/],
    [
      "an origin with a path",
      { allowedOrigins: ["https://a.example/mcp"] },
      /"https:\/\/a\.example\/mcp" is not an origin/,
    ],
    ["an origin that is not http", { allowedOrigins: ["file:///tmp"] }, /is not an origin/],
  ])("%s: refused, naming the problem and never the token", (_case, options, reason) => {
    expect(() => new McpHttpGuard({ host: "127.0.0.1", ...options })).toThrow(reason);
    try {
      new McpHttpGuard({ host: "127.0.0.1", ...options });
    } catch (error) {
      if ("token" in options) expect((error as Error).message).not.toContain(options.token);
    }
  });

  it.each([
    ["localhost", true],
    ["127.0.0.1", true],
    ["127.8.9.10", true],
    ["::1", true],
    ["[::1]", true],
    ["::ffff:127.0.0.1", true],
    ["0.0.0.0", false],
    ["::", false],
    ["10.0.0.5", false],
    ["localhost.evil.example", false],
  ])("isLoopbackHost(%s) is %s", (host, loopback) => {
    expect(isLoopbackHost(host)).toBe(loopback);
  });
});
