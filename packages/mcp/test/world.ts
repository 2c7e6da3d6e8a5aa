// What every @once/mcp test file stands on: a store on the shared Redis under a prefix of its own, the
// payments stand-in (a real HTTP server that ignores idempotency keys, so only once stands between a repeated
// call and a second charge), and MCP clients connected in process to a server of once tools.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { AnyTool } from "@once/core";
import { type PaymentsServer, startPaymentsServer } from "@once/payments";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll } from "vitest";
import { type OnceMcpServerOptions, onceMcpServer } from "../src/index.js";

export let store: RedisStore;
export let payments: PaymentsServer;
export let prefix: string;

const clients: Client[] = [];

export function useMcpWorld(label: string): void {
  let redis: Redis;
  prefix = randomPrefix(label);
  beforeAll(async () => {
    redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    store = await RedisStore.create({ redis, prefix });
    payments = await startPaymentsServer({ latency: { fixedMs: 20 } });
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close()));
  });
  afterAll(async () => {
    await payments.close();
    await cleanupPrefix(redis, prefix);
    redis.disconnect();
  });
}

/** A client connected to a server of `tools` (on this file's store) through an in-process transport pair. */
export async function connect(
  tools: readonly AnyTool[],
  options: Partial<OnceMcpServerOptions> = {},
): Promise<Client> {
  const server = onceMcpServer({ name: "once-test", version: "0.0.0", store, tools, ...options });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "once-test-client", version: "0.0.0" });
  await client.connect(clientSide);
  clients.push(client);
  return client;
}

/** The charges the provider made for an order. */
export const chargesOf = (orderId: string) => payments.ledger().charges.byOrder[orderId] ?? 0;
