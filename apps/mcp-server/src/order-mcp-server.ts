import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { onceMcpServer } from "@once/mcp";
import { keyLayout, openOrderStore, orderAgentTools, RedisOrderBook } from "@once/order-agent";
import { Redis } from "ioredis";

export interface OrderMcpServerOptions {
  redisUrl: string;
  /** Root of every key (see `keyLayout`): the same as the workers' and orchestrators' of this deployment. */
  prefix: string;
  paymentsUrl: string;
  /** once's lease of an effect call: how long a call cut off by a crash holds its step. Default 30 s. */
  leaseMs?: number;
  /** Orders created (pending, 42.00 eur) unless they exist, for the read and write tools to find. */
  seedOrders?: readonly string[];
}

export interface OrderMcpServer {
  /** A new MCP server on the shared store and tools: one per stdio connection or HTTP request. */
  newServer(): Server;
  readonly tools: readonly string[];
  close(): Promise<void>;
}

/** The order agent's tools (on Redis and the payments stand-in) as MCP servers through once. */
export async function startOrderMcpServer(options: OrderMcpServerOptions): Promise<OrderMcpServer> {
  const layout = keyLayout(options.prefix);
  const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: null, lazyConnect: true });
  try {
    await redis.connect();
    const store = await openOrderStore({ redis, layout });
    const orders = new RedisOrderBook({ redis, prefix: layout.orders });
    for (const orderId of options.seedOrders ?? []) {
      await orders.create({
        orderId,
        status: "pending",
        amount: 4200,
        currency: "eur",
        email: "customer@example.com",
      });
    }
    const tools = orderAgentTools({ paymentsUrl: options.paymentsUrl, orders }).all;
    const settings = {
      name: "once-order-agent",
      version: "0.1.0",
      store,
      tools,
      ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
    };
    return {
      newServer: () => onceMcpServer(settings),
      tools: tools.map((t) => t.name),
      close: async () => {
        await redis.quit();
      },
    };
  } catch (error) {
    redis.disconnect();
    throw error;
  }
}
