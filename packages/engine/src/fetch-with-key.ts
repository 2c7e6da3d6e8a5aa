import type { EffectContext } from "@once/core";

/**
 * A `fetch` that sends the call's key as `Idempotency-Key` (and its fence as `Idempotency-Fence`) and
 * aborts when the lease is lost, so a provider that honours keys dedups even past once's own window.
 * Right before each request leaves it calls `ctx.assertLease()`: an owner frozen past its lease (SIGSTOP,
 * a long GC pause) finds out then, and the request is never sent, instead of learning it from the first
 * heartbeat after the request has gone. A context without `assertLease` (a hand-made one in a unit test)
 * skips that check.
 */
export function fetchWithKey(
  ctx: Pick<EffectContext, "key" | "fence" | "signal"> & Partial<Pick<EffectContext, "assertLease">>,
  fetchImpl: typeof fetch = fetch,
): typeof fetch {
  return async function fetchWithIdempotencyKey(input, init = {}) {
    const headers = new Headers(init.headers);
    headers.set("Idempotency-Key", ctx.key);
    headers.set("Idempotency-Fence", String(ctx.fence));
    const signal = init.signal ? AbortSignal.any([init.signal, ctx.signal]) : ctx.signal;
    await ctx.assertLease?.();
    return fetchImpl(input, { ...init, headers, signal });
  };
}
