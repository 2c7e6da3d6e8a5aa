import diagnostics from "node:diagnostics_channel";
import type { IncomingMessage, Server } from "node:http";
import { startPaymentsServer } from "@once/payments";
import { STEP_HEADER } from "./effect.js";

/** The provider every side's steps charge at, and what the bench watches there. */
export interface PeerProvider {
  url: string;
  /** Calls `listener(orderId)` as each step's POST arrives (before the charge is recorded); returns `off`. */
  onCharge(listener: (orderId: string) => void): () => void;
  /** How many charges the provider made per order id, of the order ids starting with `prefix`. */
  charges(prefix: string): Map<string, number>;
  /** Forgets every charge (between runs: its look-ups scan what it holds). */
  reset(): void;
  close(): Promise<void>;
}

/**
 * `@once/payments` on a free port, every answer held `effectMs`, honouring no idempotency key (a naive
 * provider: it charges again for every POST). It records each charge when the POST arrives, then waits, so a
 * client killed while it waits has been charged. The bench hears each POST through Node's
 * `http.server.request.start` diagnostics channel (the provider offers no hook of its own), by the step's
 * order id in a header.
 */
export async function startPeerProvider(effectMs: number): Promise<PeerProvider> {
  const server = await startPaymentsServer({ latency: { fixedMs: effectMs }, honourIdempotencyKey: false });
  const listeners = new Set<(orderId: string) => void>();
  const onRequest = (message: unknown) => {
    const { request } = message as { request: IncomingMessage; server: Server };
    if (listeners.size === 0 || request.method !== "POST" || request.socket.localPort !== server.port) return;
    const order = request.headers[STEP_HEADER];
    if (typeof order === "string") for (const listener of listeners) listener(order);
  };
  diagnostics.subscribe("http.server.request.start", onRequest);
  return {
    url: server.url,
    onCharge(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    charges(prefix) {
      const counts = new Map<string, number>();
      for (const [order, n] of Object.entries(server.ledger().charges.byOrder))
        if (order.startsWith(prefix)) counts.set(order, n);
      return counts;
    },
    reset: () => server.reset(),
    async close() {
      diagnostics.unsubscribe("http.server.request.start", onRequest);
      await server.close();
    },
  };
}
