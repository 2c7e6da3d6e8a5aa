import { startPaymentsServer } from "@once/payments";
import { afterAll, beforeAll, expect, it } from "vitest";
import { fetchWithKey } from "../src/index.js";

let payments: Awaited<ReturnType<typeof startPaymentsServer>>;

beforeAll(async () => {
  payments = await startPaymentsServer({ latency: "none", honourIdempotencyKey: true });
});

afterAll(async () => {
  await payments.close();
});

const body = JSON.stringify({ amount: 100, currency: "eur", orderId: "order_9" });

it("sends the key as Idempotency-Key, so a provider that honours it charges once", async () => {
  const ctx = { key: "a".repeat(64), fence: 3, signal: new AbortController().signal };
  const send = fetchWithKey(ctx);
  const first = await send(`${payments.url}/charges`, { method: "POST", body });
  const second = await send(`${payments.url}/charges`, { method: "POST", body });
  expect(first.status).toBe(201);
  expect(second.headers.get("idempotent-replayed")).toBe("true");
  expect(((await second.json()) as { id: string }).id).toBe(((await first.json()) as { id: string }).id);
  expect(payments.ledger().charges.total).toBe(1);
});

it("aborts the request when the lease is lost", async () => {
  const lease = new AbortController();
  const send = fetchWithKey({ key: "b".repeat(64), fence: 1, signal: lease.signal });
  const request = send(`${payments.url}/charges`, {
    method: "POST",
    body,
    headers: { "X-Latency-Ms": "5000" },
  });
  lease.abort(new Error("lease lost"));
  await expect(request).rejects.toThrow("lease lost");
});
