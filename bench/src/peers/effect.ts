/** The header each step's POST carries its order id in, so the bench can pick the POST to kill inside. */
export const STEP_HEADER = "x-bench-order";

/** The charge every step makes: one POST to the provider, which records it before it waits its latency. */
export interface Charge {
  id: string;
  orderId: string;
}

/**
 * One step's effect: a charge at the provider for `order` (a step's order id). `idempotencyKey` is what the
 * engine offers as the step's id, sent as `Idempotency-Key` (the naive provider ignores it); `metadata` lets a
 * reconcile hook find the charge again.
 */
export async function charge(
  providerUrl: string,
  order: string,
  options: { idempotencyKey?: string; metadata?: Record<string, string>; fetch?: typeof fetch } = {},
): Promise<Charge> {
  const headers: Record<string, string> = { "content-type": "application/json", [STEP_HEADER]: order };
  if (options.idempotencyKey !== undefined) headers["idempotency-key"] = options.idempotencyKey;
  const response = await (options.fetch ?? fetch)(`${providerUrl}/charges`, {
    method: "POST",
    headers,
    body: JSON.stringify({ amount: 4200, currency: "eur", orderId: order, metadata: options.metadata ?? {} }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`POST /charges for ${order}: ${response.status} ${text}`);
  const body = JSON.parse(text) as Charge;
  return { id: body.id, orderId: body.orderId };
}

/** The charge whose metadata holds `once_key = key`, if the provider made one (a reconcile hook's question). */
export async function findCharge(
  providerUrl: string,
  key: string,
  signal?: AbortSignal,
): Promise<Charge | undefined> {
  const response = await fetch(`${providerUrl}/charges?metadata.once_key=${encodeURIComponent(key)}`, {
    signal,
  });
  if (!response.ok) throw new Error(`GET /charges: ${response.status} ${await response.text()}`);
  const [found] = ((await response.json()) as { data: Charge[] }).data;
  return found && { id: found.id, orderId: found.orderId };
}
