// The built MCP server in processes of its own, driven by the SDK's own Client over stdio and over
// Streamable HTTP, on a payments stand-in in this process that ignores idempotency keys: only once stands
// between a repeated call and a second charge. SIGKILLed mid-charge and restarted, the server answers the
// same step from the provider (reconciled), and the customer is charged once.

import { existsSync } from "node:fs";

import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { callOnceTool, ONCE_REPLAYED_META, type OnceStep } from "@once/mcp";
import { keyLayout } from "@once/order-agent";
import { PaymentsClient, type PaymentsServer, startPaymentsServer } from "@once/payments";
import { cleanupPrefix, freePort, NodeChild, randomPrefix, rawToolCall, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";

const MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url));
const layout = keyLayout(randomPrefix("mcp-server"));
const LEASE_MS = 1_000;

let redis: Redis;
/** Answers in 100 ms: long enough for two clients' calls of one step to overlap. */
let payments: PaymentsServer;
/** Records a charge at once and answers 30 s later: a server killed in between has charged. */
let slowPayments: PaymentsServer;

beforeAll(async () => {
  expect(existsSync(MAIN), "build @once/mcp-server before testing it").toBe(true);
  redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  payments = await startPaymentsServer({ latency: { fixedMs: 100 } });
  slowPayments = await startPaymentsServer({ latency: { fixedMs: 30_000 } });
});
afterAll(async () => {
  await Promise.all([payments.close(), slowPayments.close()]);
  await cleanupPrefix(redis, layout.root);
  redis.disconnect();
});

/** What one test opens: clients (whose stdio servers they own) and HTTP server processes. */
const opened: { clients: Client[]; servers: NodeChild[] } = { clients: [], servers: [] };
afterEach(async () => {
  await Promise.all(opened.clients.splice(0).map((client) => client.close()));
  await Promise.all(opened.servers.splice(0).map((server) => server.stop()));
});

const serverArgs = (paymentsUrl: string) => [
  "--redis-url",
  redisUrl(),
  "--prefix",
  layout.root,
  "--payments-url",
  paymentsUrl,
  "--lease-ms",
  String(LEASE_MS),
];

/** How a test reaches a server: a client of its own, and a way to SIGKILL the server it talks to. */
interface Connection {
  client: Client;
  kill(): Promise<void>;
}

interface Transport {
  /** A server process on the provider at `paymentsUrl`, and a client connected to it. */
  start(paymentsUrl: string): Promise<Connection>;
  /** The server started again (same port for HTTP), and a client connected to it. */
  restart(paymentsUrl: string): Promise<Connection>;
  /** A second client of the same step: over stdio, of a second server process on the same store. */
  another(paymentsUrl: string): Promise<Connection>;
}

async function connected(client: Client, transport: StdioClientTransport | StreamableHTTPClientTransport) {
  await client.connect(transport);
  opened.clients.push(client);
  return client;
}

const stdio: Transport = {
  async start(paymentsUrl) {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [MAIN, ...serverArgs(paymentsUrl)],
      stderr: "pipe",
    });
    const client = await connected(new Client({ name: "test", version: "0" }), transport);
    return {
      client,
      kill: async () => {
        const exited = new Promise((resolve) => {
          client.onclose = () => resolve(undefined);
        });
        process.kill(transport.pid as number, "SIGKILL");
        await exited;
      },
    };
  },
  restart: (paymentsUrl) => stdio.start(paymentsUrl),
  another: (paymentsUrl) => stdio.start(paymentsUrl),
};

function http(): Transport {
  let port = 0;
  const connect = async (url: string, server: NodeChild) => ({
    client: await connected(
      new Client({ name: "test", version: "0" }),
      new StreamableHTTPClientTransport(new URL(url)),
    ),
    kill: async () => void (await server.kill("SIGKILL")),
  });
  const serve = async (paymentsUrl: string) => {
    port ||= await freePort();
    const server = await NodeChild.startReady<{ type: string; url?: string }>({
      script: MAIN,
      args: ["--http", String(port), ...serverArgs(paymentsUrl)],
      name: "mcp-server",
      ready: "ready",
    });
    opened.servers.push(server);
    return server;
  };
  let current: NodeChild | undefined;
  return {
    async start(paymentsUrl) {
      current = await serve(paymentsUrl);
      return connect(current.events[0]?.url as string, current);
    },
    restart(paymentsUrl) {
      return this.start(paymentsUrl);
    },
    another: async () => connect((current as NodeChild).events[0]?.url as string, current as NodeChild),
  };
}

const textOf = (result: CallToolResult) =>
  result.content.map((part) => (part as { text: string }).text).join();
let serial = 0;

describe.each([
  ["stdio", () => stdio],
  ["Streamable HTTP", http],
])("over %s", (_name, transportFor) => {
  const newOrder = () => `order-${_name === "stdio" ? "stdio" : "http"}-${process.pid}-${++serial}`;
  const charge = (client: Client, orderId: string, step: OnceStep) =>
    callOnceTool(client, "charge_customer", { orderId, amount: 4200, currency: "eur" }, step);
  const chargesOf = (server: PaymentsServer, orderId: string) =>
    server.ledger().charges.byOrder[orderId] ?? 0;

  it("lists the order agent's tools, each with the hints of its kind", async () => {
    const { client } = await transportFor().start(payments.url);
    const { tools } = await client.listTools();
    expect(Object.fromEntries(tools.map((t) => [t.name, t.annotations?.readOnlyHint]))).toEqual({
      get_order_status: true,
      set_status: false,
      charge_customer: false,
      send_email: false,
      create_ticket: false,
    });
  });

  it("an effect called twice with the same step: one charge, the second answered from the store", async () => {
    const orderId = newOrder();
    const { client } = await transportFor().start(payments.url);
    const step = { taskId: `task-${orderId}`, stepId: "charge" };
    const first = await charge(client, orderId, step);
    const second = await charge(client, orderId, step);
    expect(first.isError, textOf(first)).toBeUndefined();
    expect(first._meta?.[ONCE_REPLAYED_META]).toBe(false);
    expect(second._meta?.[ONCE_REPLAYED_META]).toBe(true);
    expect(second.structuredContent).toEqual(first.structuredContent);
    expect(chargesOf(payments, orderId)).toBe(1);
  });

  it("an effect called without a step: refused with the reason in words, no charge", async () => {
    const orderId = newOrder();
    const { client } = await transportFor().start(payments.url);
    const result = (await client.callTool({
      name: "charge_customer",
      arguments: { orderId, amount: 4200, currency: "eur" },
    })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(
      /^charge_customer is an effect tool: name the call's step in _meta\["once\/step"\]/,
    );
    expect(chargesOf(payments, orderId)).toBe(0);
  });

  it("the server SIGKILLed mid-charge and restarted, the same step called again: still one charge", async () => {
    const orderId = newOrder();
    const transport = transportFor();
    const first = await transport.start(slowPayments.url);
    const step = { taskId: `task-${orderId}`, stepId: "charge" };
    const cut = charge(first.client, orderId, step).then(
      () => "answered",
      () => "cut off",
    );
    // The provider has charged and is taking its time to say so: the server dies now.
    await vi.waitFor(() => expect(chargesOf(slowPayments, orderId)).toBe(1), {
      timeout: 10_000,
      interval: 20,
    });
    await first.kill();
    expect(await cut).toBe("cut off");

    const second = await transport.restart(slowPayments.url);
    const again = await charge(second.client, orderId, step);
    expect(again.isError, textOf(again)).toBeUndefined();
    // Reconciled: the provider's own charge, found by the key it carries, is the answer.
    const [made] = await new PaymentsClient(slowPayments.url).findCharges({ orderId });
    expect(again.structuredContent).toMatchObject({ chargeId: made?.id, orderId, amount: 4200 });
    expect(chargesOf(slowPayments, orderId)).toBe(1);
    const replayed = await charge(second.client, orderId, step);
    expect(replayed.structuredContent).toEqual(again.structuredContent);
    expect(chargesOf(slowPayments, orderId)).toBe(1);
  });

  it("two clients calling one step at once: one charge, the same answer", async () => {
    const orderId = newOrder();
    const transport = transportFor();
    const a = await transport.start(payments.url);
    const b = await transport.another(payments.url);
    const step = { taskId: `task-${orderId}`, stepId: "charge" };
    const [x, y] = await Promise.all([charge(a.client, orderId, step), charge(b.client, orderId, step)]);
    expect(x.isError, textOf(x)).toBeUndefined();
    expect(y.structuredContent).toEqual(x.structuredContent);
    expect(chargesOf(payments, orderId)).toBe(1);
  });
});

it("--payments --seed-order: a self-contained try, with a payments stand-in and an order of its own", async () => {
  const server = await NodeChild.startReady<{ type: string; url?: string; payments?: string }>({
    script: MAIN,
    args: [
      "--http",
      "0",
      "--redis-url",
      redisUrl(),
      "--prefix",
      layout.root,
      "--payments",
      "--seed-order",
      "order-try",
    ],
    name: "mcp-server",
    ready: "ready",
  });
  opened.servers.push(server);
  const ready = server.events[0];
  const client = await connected(
    new Client({ name: "test", version: "0" }),
    new StreamableHTTPClientTransport(new URL(ready?.url as string)),
  );
  const order = await client.callTool({ name: "get_order_status", arguments: { orderId: "order-try" } });
  expect(order.structuredContent).toMatchObject({ orderId: "order-try", status: "pending", amount: 4200 });
  const step = { taskId: "task-try", stepId: "charge" };
  await callOnceTool(
    client,
    "charge_customer",
    { orderId: "order-try", amount: 4200, currency: "eur" },
    step,
  );
  await callOnceTool(
    client,
    "charge_customer",
    { orderId: "order-try", amount: 4200, currency: "eur" },
    step,
  );
  const ledger = await new PaymentsClient(ready?.payments as string).ledger();
  expect(ledger.charges.byOrder["order-try"]).toBe(1);
});

/** The built server on HTTP, port 0, on the fast provider, with `extra` flags; `env` its whole environment. */
async function httpServer(extra: readonly string[] = [], env?: NodeJS.ProcessEnv) {
  const server = await NodeChild.startReady<{ type: string; url?: string }>({
    script: MAIN,
    args: ["--http", "0", ...serverArgs(payments.url), ...extra],
    ...(env === undefined ? {} : { env }),
    name: "mcp-server",
    ready: "ready",
  });
  opened.servers.push(server);
  return { server, url: new URL(server.events[0]?.url as string) };
}

/** The loopback address of a server's URL (one bound to 0.0.0.0 or :: is reached on it too). */
const reachable = (url: URL) => {
  const local = new URL(url);
  if (local.hostname === "0.0.0.0") local.hostname = "127.0.0.1";
  if (local.hostname === "[::]") local.hostname = "[::1]";
  return local;
};

/**
 * A `tools/call` of charge_customer with a valid step, as one raw POST carrying `headers` (node:http, since
 * fetch cannot set Host): what a page or a script that is not an MCP client can send.
 */
function rawCharge(url: URL, orderId: string, headers: Record<string, string> = {}) {
  const call = {
    name: "charge_customer",
    arguments: { orderId, amount: 4200, currency: "eur" },
    _meta: { "once/step": { taskId: `task-${orderId}`, stepId: "charge" } },
  };
  return rawToolCall(reachable(url), call, headers);
}

/** The SDK's client, sending `headers` with every request, calling charge_customer twice with one step. */
async function chargeTwice(url: URL, orderId: string, headers: Record<string, string> = {}) {
  const client = await connected(
    new Client({ name: "test", version: "0" }),
    new StreamableHTTPClientTransport(reachable(url), { requestInit: { headers } }),
  );
  const step = { taskId: `task-${orderId}`, stepId: "charge" };
  const args = { orderId, amount: 4200, currency: "eur" };
  const first = await callOnceTool(client, "charge_customer", args, step);
  const second = await callOnceTool(client, "charge_customer", args, step);
  expect(first.isError, textOf(first)).toBeUndefined();
  expect(second._meta?.[ONCE_REPLAYED_META]).toBe(true);
}

const chargesAt = (orderId: string) => payments.ledger().charges.byOrder[orderId] ?? 0;
let order = 0;
const nextOrder = () => `order-access-${process.pid}-${++order}`;
const TOKEN = "0123456789abcdef-mcp-token";

/** Starts the server with `args` and resolves with how it ended, or "started" if it got ready instead. */
async function refusedStart(args: readonly string[]) {
  const child = NodeChild.start<{ type: string }>({ script: MAIN, args, name: "mcp-server" });
  opened.servers.push(child);
  const started = await child.waitFor("ready").then(
    () => true,
    () => false, // it exited first
  );
  return { ended: started ? "started" : await child.exited, child };
}

describe("who may call over HTTP", () => {
  it("bound to a loopback address: a request for another host name is refused, 403 naming it, nothing runs", async () => {
    const { url } = await httpServer();
    const orderId = nextOrder();
    expect(await rawCharge(url, orderId, { Host: "evil.example" })).toMatchObject({
      status: 403,
      message: "host evil.example refused: not a name this server answers",
    });
    expect(chargesAt(orderId)).toBe(0);
  });

  it("an Origin of another site is refused, 403 naming it, nothing runs; the server's own loopback origin calls once", async () => {
    const { url } = await httpServer();
    for (const origin of ["http://evil.example", `http://evil.example:${url.port}`]) {
      const orderId = nextOrder();
      expect(await rawCharge(url, orderId, { Origin: origin })).toMatchObject({
        status: 403,
        message: `origin ${origin} refused: not an origin this server answers`,
      });
      expect(chargesAt(orderId)).toBe(0);
    }
    const orderId = nextOrder();
    await chargeTwice(url, orderId, { Origin: `http://localhost:${url.port}` });
    expect(chargesAt(orderId)).toBe(1);
  });

  it("--allowed-origin: the origin listed calls once; the loopback default is then refused", async () => {
    const { url } = await httpServer(["--allowed-origin", "https://agent.example"]);
    const refused = nextOrder();
    expect(await rawCharge(url, refused, { Origin: `http://127.0.0.1:${url.port}` })).toMatchObject({
      status: 403,
    });
    expect(chargesAt(refused)).toBe(0);
    const orderId = nextOrder();
    await chargeTwice(url, orderId, { Origin: "https://agent.example" });
    expect(chargesAt(orderId)).toBe(1);
  });

  it("--host 0.0.0.0 with no token: refuses to start, saying what to give", async () => {
    const { ended, child } = await refusedStart([
      "--http",
      "0",
      "--host",
      "0.0.0.0",
      ...serverArgs(payments.url),
    ]);
    expect(ended).toEqual([2, null]);
    expect(child.stderr()).toContain(
      "mcp-server: --host 0.0.0.0 is not a loopback address, so anyone who can reach the port could call the " +
        "tools, charges included: give a bearer token (ONCE_MCP_TOKEN or --token; clients then send " +
        "Authorization: Bearer <token>), or --insecure-no-auth to serve it with none",
    );
  });

  it("--host 0.0.0.0 --insecure-no-auth: starts with a warning, and takes calls with no token", async () => {
    const { server, url } = await httpServer(["--host", "0.0.0.0", "--insecure-no-auth"]);
    await vi.waitFor(() =>
      expect(server.stderr()).toContain(
        `mcp-server: warning: --insecure-no-auth: ${url.href} takes calls with no authentication`,
      ),
    );
    const orderId = nextOrder();
    await chargeTwice(url, orderId);
    expect(chargesAt(orderId)).toBe(1);
  });

  it("--host 0.0.0.0 with ONCE_MCP_TOKEN: missing or wrong token 401, nothing runs; the right one calls once; the token in no output", async () => {
    const { server, url } = await httpServer(["--host", "0.0.0.0"], {
      ...process.env,
      ONCE_MCP_TOKEN: TOKEN,
    });
    const orderId = nextOrder();
    expect(await rawCharge(url, orderId)).toMatchObject({ status: 401, authenticate: "Bearer" });
    expect(await rawCharge(url, orderId, { Authorization: `Bearer ${TOKEN}-not` })).toMatchObject({
      status: 401,
      authenticate: 'Bearer error="invalid_token"',
    });
    // With an Origin allowed and the Host unchecked, the token alone stands between a caller and a charge.
    expect(await rawCharge(url, orderId, { Host: "anything.example" })).toMatchObject({ status: 401 });
    expect(chargesAt(orderId)).toBe(0);
    await chargeTwice(url, orderId, { Authorization: `Bearer ${TOKEN}` });
    expect(chargesAt(orderId)).toBe(1);
    await server.stop();
    expect(JSON.stringify(server.events) + server.stderr()).not.toContain(TOKEN);
  });

  it("--token with --allowed-host on 0.0.0.0: another name 403 even with the token; the name listed calls", async () => {
    const { url } = await httpServer([
      "--host",
      "0.0.0.0",
      "--token",
      TOKEN,
      "--allowed-host",
      "mcp.internal",
    ]);
    const authorization = `Bearer ${TOKEN}`;
    const refused = nextOrder();
    expect(
      await rawCharge(url, refused, { Host: "evil.example", Authorization: authorization }),
    ).toMatchObject({
      status: 403,
      message: "host evil.example refused: not a name this server answers",
    });
    expect(chargesAt(refused)).toBe(0);
    const orderId = nextOrder();
    expect(
      await rawCharge(url, orderId, { Host: `mcp.internal:${url.port}`, Authorization: authorization }),
    ).toMatchObject({ status: 200 });
    expect(chargesAt(orderId)).toBe(1);
  });

  it.each([
    [["--host", "0.0.0.0", "--token", "short"], "the bearer token must be 16 characters or more"],
    [["--host", "0.0.0.0", "--token", TOKEN, "--insecure-no-auth"], "or --insecure-no-auth, not both"],
    [["--allowed-origin", "evil.example"], '"evil.example" is not an origin'],
  ])("%j: refuses to start, naming the problem", async (flags, reason) => {
    const { ended, child } = await refusedStart(["--http", "0", ...serverArgs(payments.url), ...flags]);
    expect(ended).toEqual([2, null]);
    expect(child.stderr()).toContain(reason);
    const token = flags.includes("--token") ? flags[flags.indexOf("--token") + 1] : undefined;
    if (token !== undefined) expect(child.stderr()).not.toContain(token);
  });
});
