// The built MCP server in processes of its own, driven by the SDK's own Client over stdio and over
// Streamable HTTP, on a payments stand-in in this process that ignores idempotency keys: only once stands
// between a repeated call and a second charge. SIGKILLed mid-charge and restarted, the server answers the
// same step from the provider (reconciled), and the customer is charged once.

import { existsSync } from "node:fs";
import { request } from "node:http";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { callOnceTool, ONCE_REPLAYED_META, type OnceStep } from "@once/mcp";
import { keyLayout } from "@once/order-agent";
import { PaymentsClient, type PaymentsServer, startPaymentsServer } from "@once/payments";
import { cleanupPrefix, freePort, NodeChild, randomPrefix, redisUrl } from "@once/support";
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

it("refuses a request for another host name when bound to a loopback address", async () => {
  const server = await NodeChild.startReady<{ type: string; url?: string }>({
    script: MAIN,
    args: ["--http", "0", "--redis-url", redisUrl(), "--prefix", layout.root, "--payments-url", payments.url],
    name: "mcp-server",
    ready: "ready",
  });
  opened.servers.push(server);
  const url = new URL(server.events[0]?.url as string);
  const status = await new Promise<number | undefined>((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path: "/mcp", method: "POST", headers: { Host: "evil.example" } },
      (res) => {
        res.resume();
        resolve(res.statusCode);
      },
    );
    req.on("error", reject);
    req.end("{}");
  });
  expect(status).toBe(403);
});
