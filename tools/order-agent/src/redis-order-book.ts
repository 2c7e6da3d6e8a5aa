import type { Redis } from "ioredis";
import { type Order, type OrderBook, type OrderStatus, orderSchema } from "./order-book.js";

export interface RedisOrderBookOptions {
  /** The client; the order book never closes it. */
  redis: Redis;
  /** Prepended to `<orderId>`; one hash per order. */
  prefix: string;
}

// Create-if-absent and set-if-present are single scripts so two workers never interleave half an order.
const CREATE = `
if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
redis.call("HSET", KEYS[1], "status", ARGV[1], "amount", ARGV[2], "currency", ARGV[3], "email", ARGV[4])
return 1`;
const SET_STATUS = `
if redis.call("EXISTS", KEYS[1]) == 0 then return 0 end
redis.call("HSET", KEYS[1], "status", ARGV[1])
return 1`;

/** Orders in Redis, shared by every worker process: one hash per order. */
export class RedisOrderBook implements OrderBook {
  readonly #redis: Redis;
  readonly #prefix: string;

  constructor(options: RedisOrderBookOptions) {
    this.#redis = options.redis;
    this.#prefix = options.prefix;
  }

  async create(order: Order): Promise<boolean> {
    const valid = orderSchema.parse(order);
    const added = await this.#redis.eval(
      CREATE,
      1,
      this.#prefix + valid.orderId,
      valid.status,
      String(valid.amount),
      valid.currency,
      valid.email,
    );
    return added === 1;
  }

  async get(orderId: string): Promise<Order | undefined> {
    const fields = await this.#redis.hgetall(this.#prefix + orderId);
    if (Object.keys(fields).length === 0) return undefined;
    return orderSchema.parse({ ...fields, orderId, amount: Number(fields.amount) });
  }

  async setStatus(orderId: string, status: OrderStatus): Promise<Order | undefined> {
    const updated = await this.#redis.eval(SET_STATUS, 1, this.#prefix + orderId, status);
    return updated === 1 ? this.get(orderId) : undefined;
  }
}
