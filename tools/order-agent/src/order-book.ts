import { z } from "zod";

export const ORDER_STATUSES = ["pending", "paid", "cancelled"] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

/** One order as the agent's read tool returns it. `amount` is in cents. */
export const orderSchema = z.object({
  orderId: z.string().min(1).max(128),
  status: z.enum(ORDER_STATUSES),
  amount: z.number().int().positive(),
  currency: z.string().regex(/^[a-z]{3}$/),
  email: z.email(),
});
export type Order = z.infer<typeof orderSchema>;

/**
 * Where the read and write tools keep orders. Setting a status is idempotent by nature (the same call
 * lands on the same end state), which is why `set_status` is a `write` tool and skips the dedup store.
 */
export interface OrderBook {
  /** Adds the order unless one with its id exists; true when it was added. */
  create(order: Order): Promise<boolean>;
  get(orderId: string): Promise<Order | undefined>;
  /** Sets the status of an existing order; undefined when there is no such order. */
  setStatus(orderId: string, status: OrderStatus): Promise<Order | undefined>;
}
