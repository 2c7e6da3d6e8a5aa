import { LeaseLostError, MemoryStore } from "@once/core";
import { startPaymentsServer } from "@once/payments";
import { afterAll, beforeAll, expect, it } from "vitest";
import { fetchWithKey } from "../src/index.js";
import { Lease } from "../src/lease.js";

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

it("checks the lease right before the request leaves: a stale lease another owner took sends nothing", async () => {
  const key = "d".repeat(64);
  let now = 1_000_000;
  const store = new MemoryStore({ now: () => now });
  const claim = { key, fingerprint: "fp", tool: "charge", phase: "effect" as const, leaseMs: 200 };
  const first = await store.claim(claim);
  if (first.outcome !== "acquired") throw new Error(first.outcome);
  const lease = new Lease(store, key, first.token, 200);
  lease.stop(); // as if frozen: no heartbeat runs
  const send = fetchWithKey({
    key,
    fence: first.fence,
    signal: lease.signal,
    assertLease: () => lease.assert(),
  });

  // Frozen past its lease; another owner was granted the key meanwhile.
  await new Promise((resolve) => setTimeout(resolve, 150));
  now += 1_000;
  expect((await store.claim(claim)).outcome).toBe("reconcile");

  const before = payments.ledger().charges.total;
  await expect(send(`${payments.url}/charges`, { method: "POST", body })).rejects.toBeInstanceOf(
    LeaseLostError,
  );
  expect(payments.ledger().charges.total).toBe(before);
});
