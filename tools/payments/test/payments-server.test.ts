import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { PaymentsClient, PaymentsError, type PaymentsServer, startPaymentsServer } from "../src/index.js";

const charge = { amount: 1999, currency: "usd", orderId: "order-1" };

async function rejection(promise: Promise<unknown>): Promise<PaymentsError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(PaymentsError);
  return error as PaymentsError;
}

describe("payments provider, ignoring idempotency keys (the default)", () => {
  let server: PaymentsServer;
  let client: PaymentsClient;

  beforeAll(async () => {
    // No latency by default: tests that need a slow answer ask for one with X-Latency-Ms.
    server = await startPaymentsServer({ latency: "none", seed: 1 });
    client = new PaymentsClient(server.url);
  });
  afterAll(() => server.close());
  beforeEach(() => server.reset());

  it("creates a charge and answers 201 with the record", async () => {
    const response = await fetch(`${server.url}/charges`, { method: "POST", body: JSON.stringify(charge) });
    expect(response.status).toBe(201);
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ ...charge, metadata: {} });
    expect(body.id).toMatch(/^ch_[0-9a-f]+$/);
    expect(Number.isNaN(Date.parse(String(body.createdAt)))).toBe(false);
  });

  it("records the charge on acceptance, so a client that gives up early has still been charged", async () => {
    const controller = new AbortController();
    const pending = client.charge(charge, {
      signal: controller.signal,
      headers: { "X-Latency-Ms": "60000" },
    });
    // The answer is a minute away, yet the charge is already on the ledger.
    await vi.waitFor(() => expect(server.ledger().charges.total).toBe(1));
    controller.abort();
    const error = await rejection(pending);
    expect(error.code).toBe("aborted");
    expect(error.refusedBeforeActing).toBe(false);
    expect(server.ledger().charges.byOrder).toEqual({ "order-1": 1 });
  });

  it("ignores Idempotency-Key, charging twice for the same key", async () => {
    const send = () =>
      fetch(`${server.url}/charges`, {
        method: "POST",
        headers: { "Idempotency-Key": "key-1" },
        body: JSON.stringify(charge),
      });
    const [first, second] = [await send(), await send()];
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(second.headers.get("Idempotent-Replayed")).toBeNull();
    expect(server.ledger().charges).toEqual({ total: 2, byOrder: { "order-1": 2 }, duplicates: 1 });
  });

  it.each([
    [{ ...charge, amount: 0 }, "amount"],
    [{ ...charge, amount: 12.5 }, "amount"],
    [{ ...charge, amount: "1999" }, "amount"],
    [{ ...charge, currency: "dollars" }, "currency"],
    [{ amount: 1999, currency: "usd" }, "orderId"],
    [{ ...charge, orderId: "" }, "orderId"],
    [{ ...charge, metadata: { once_key: 7 } }, "metadata.once_key"],
    [{ ...charge, metadata: ["a"] }, "metadata"],
    [{ ...charge, orderID: "typo" }, "orderID"],
    [[charge], "JSON object"],
  ])("refuses %j with a 400 naming %s, recording nothing", async (body, named) => {
    const response = await fetch(`${server.url}/charges`, { method: "POST", body: JSON.stringify(body) });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: string }).error).toContain(named);
    expect(server.ledger().charges.total).toBe(0);
  });

  it("refuses malformed JSON and malformed control headers with a 400", async () => {
    const malformed = await fetch(`${server.url}/charges`, { method: "POST", body: "{amount:" });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toEqual({ error: "body is not valid JSON" });
    const badLatency = await rejection(client.charge(charge, { headers: { "X-Latency-Ms": "soon" } }));
    expect(badLatency.message).toContain("X-Latency-Ms");
    const badFail = await rejection(client.charge(charge, { headers: { "X-Fail": "sometimes" } }));
    expect(badFail.message).toContain("X-Fail");
    expect(badFail).toMatchObject({ status: 400, code: "refused", refusedBeforeActing: true });
    expect(server.ledger().charges.total).toBe(0);
  });

  it("X-Fail: before answers 503 and records nothing", async () => {
    const error = await rejection(client.charge(charge, { headers: { "X-Fail": "before" } }));
    expect(error).toMatchObject({ status: 503, code: "refused", refusedBeforeActing: true });
    expect(server.ledger().charges.total).toBe(0);
  });

  it("X-Fail: after records the charge, then drops the connection without answering", async () => {
    const error = await rejection(client.charge(charge, { headers: { "X-Fail": "after" } }));
    expect(error).toMatchObject({ status: undefined, code: "connection_lost", refusedBeforeActing: false });
    expect(server.ledger().charges.total).toBe(1);
  });

  it("finds charges, emails and tickets by orderId and by metadata", async () => {
    const a = await client.charge({ ...charge, metadata: { once_key: "k-a", tenant: "t1" } });
    const b = await client.charge({
      ...charge,
      orderId: "order-2",
      metadata: { once_key: "k-b", tenant: "t1" },
    });
    await client.charge({ ...charge, orderId: "order-3" });
    expect(await client.findCharges({ metadata: { once_key: "k-a" } })).toEqual([a]);
    expect(await client.findCharges({ metadata: { tenant: "t1" } })).toEqual([a, b]);
    expect(await client.findCharges({ orderId: "order-2", metadata: { tenant: "t1" } })).toEqual([b]);
    expect(await client.findCharges({ metadata: { once_key: "missing" } })).toEqual([]);
    expect(await client.findCharges()).toHaveLength(3);

    const email = await client.sendEmail({
      to: "buyer@example.com",
      subject: "Receipt",
      orderId: "order-1",
      metadata: { once_key: "k-e" },
    });
    expect(email.id).toMatch(/^em_/);
    expect(await client.findEmails({ metadata: { once_key: "k-e" } })).toEqual([email]);
    const ticket = await client.createTicket({
      orderId: "order-1",
      subject: "Ship it",
      metadata: { once_key: "k-t" },
    });
    expect(ticket.id).toMatch(/^tk_/);
    expect(await client.findTickets({ orderId: "order-1" })).toEqual([ticket]);

    const raw = await fetch(`${server.url}/charges?metadata.once_key=k-b`);
    expect(await raw.json()).toEqual({ data: [b] });
    const unknown = await fetch(`${server.url}/charges?customer=c1`);
    expect(unknown.status).toBe(400);
  });

  it("counts totals and duplicates per order for each kind, and resets", async () => {
    for (const orderId of ["o1", "o1", "o1", "o2"]) await client.charge({ ...charge, orderId });
    for (const orderId of ["o1", "o1"])
      await client.sendEmail({ to: "a@example.com", subject: "Hi", orderId });
    await client.createTicket({ orderId: "o2", subject: "Check" });
    const expected = {
      charges: { total: 4, byOrder: { o1: 3, o2: 1 }, duplicates: 2 },
      emails: { total: 2, byOrder: { o1: 2 }, duplicates: 1 },
      tickets: { total: 1, byOrder: { o2: 1 }, duplicates: 0 },
    };
    expect(await client.ledger()).toEqual(expected);
    expect(server.ledger()).toEqual(expected);

    await client.reset();
    const empty = { total: 0, byOrder: {}, duplicates: 0 };
    expect(await client.ledger()).toEqual({ charges: empty, emails: empty, tickets: empty });
  });

  it("answers unknown routes with 404 and wrong methods with 405", async () => {
    expect((await fetch(`${server.url}/refunds`)).status).toBe(404);
    const wrong = await fetch(`${server.url}/ledger`, { method: "DELETE" });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get("Allow")).toBe("GET");
  });
});

describe("payments provider honouring idempotency keys", () => {
  let server: PaymentsServer;
  let client: PaymentsClient;

  beforeAll(async () => {
    server = await startPaymentsServer({ latency: "none", honourIdempotencyKey: true });
    client = new PaymentsClient(server.url);
  });
  afterAll(() => server.close());
  beforeEach(() => server.reset());

  const send = (key: string, body: object = charge) =>
    fetch(`${server.url}/charges`, {
      method: "POST",
      headers: { "Idempotency-Key": key },
      body: JSON.stringify(body),
    });

  it("replays the original charge for a repeated key, with 200 and Idempotent-Replayed", async () => {
    const first = await send("key-1");
    const second = await send("key-1");
    expect(first.status).toBe(201);
    expect(second.status).toBe(200);
    expect(second.headers.get("Idempotent-Replayed")).toBe("true");
    expect(await second.json()).toEqual(await first.json());
    expect(server.ledger().charges.total).toBe(1);
  });

  it("replays even while the first request is still waiting for its answer", async () => {
    const controller = new AbortController();
    const slow = client.charge(charge, {
      idempotencyKey: "key-2",
      signal: controller.signal,
      headers: { "X-Latency-Ms": "60000" },
    });
    await vi.waitFor(() => expect(server.ledger().charges.total).toBe(1));
    const replay = await client.charge(charge, { idempotencyKey: "key-2" });
    expect((await client.findCharges({ orderId: charge.orderId })).map((c) => c.id)).toEqual([replay.id]);
    controller.abort();
    await rejection(slow);
    expect(server.ledger().charges.total).toBe(1);
  });

  it("treats different keys, and requests without a key, as different charges", async () => {
    await send("key-a");
    await send("key-b");
    await client.charge(charge);
    expect(server.ledger().charges).toEqual({ total: 3, byOrder: { "order-1": 3 }, duplicates: 2 });
  });

  it("refuses a key reused with a different body with 409, recording nothing", async () => {
    await send("key-3");
    const error = await rejection(client.charge({ ...charge, amount: 1 }, { idempotencyKey: "key-3" }));
    expect(error).toMatchObject({ status: 409, code: "refused", refusedBeforeActing: true });
    expect(server.ledger().charges.total).toBe(1);
  });

  it("scopes a key to one kind of effect", async () => {
    await client.charge(charge, { idempotencyKey: "shared" });
    await client.createTicket({ orderId: "order-1", subject: "Refund" }, { idempotencyKey: "shared" });
    expect(server.ledger().charges.total).toBe(1);
    expect(server.ledger().tickets.total).toBe(1);
  });
});

describe("PaymentsClient", () => {
  it("reports a refused connection as refused before acting", async () => {
    const server = await startPaymentsServer({ latency: "none" });
    await server.close();
    const error = await rejection(new PaymentsClient(server.url).charge(charge));
    expect(error).toMatchObject({ code: "refused", refusedBeforeActing: true, status: undefined });
  });
});
