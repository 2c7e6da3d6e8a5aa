import type { Order, OrderBook, OrderStatus } from "./order-book.js";

/** An order book in this process's memory: for unit tests and single-process runs. */
export class MemoryOrderBook implements OrderBook {
  readonly #orders = new Map<string, Order>();

  async create(order: Order): Promise<boolean> {
    if (this.#orders.has(order.orderId)) return false;
    this.#orders.set(order.orderId, { ...order });
    return true;
  }

  async get(orderId: string): Promise<Order | undefined> {
    const order = this.#orders.get(orderId);
    return order && { ...order };
  }

  async setStatus(orderId: string, status: OrderStatus): Promise<Order | undefined> {
    const order = this.#orders.get(orderId);
    if (!order) return undefined;
    order.status = status;
    return { ...order };
  }
}
