import type { EffectContext } from "@once/core";

/**
 * A `fetch` that sends the call's key as `Idempotency-Key` (and its fence as `Idempotency-Fence`) and
 * aborts when the lease is lost, so a provider that honours keys dedups even past once's own window.
 */
export function fetchWithKey(
  ctx: Pick<EffectContext, "key" | "fence" | "signal">,
  fetchImpl: typeof fetch = fetch,
): typeof fetch {
  return function fetchWithIdempotencyKey(input, init = {}) {
    const headers = new Headers(init.headers);
    headers.set("Idempotency-Key", ctx.key);
    headers.set("Idempotency-Fence", String(ctx.fence));
    const signal = init.signal ? AbortSignal.any([init.signal, ctx.signal]) : ctx.signal;
    return fetchImpl(input, { ...init, headers, signal });
  };
}
