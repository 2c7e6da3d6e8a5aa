import type { ErrorClass } from "@once/core";
import type { PaymentsError } from "@once/payments";

/**
 * How a failed provider call leaves the world, for the effect tools' `classifyError`:
 * - a 4xx other than 408/429 (a declined card, a request the provider rejects): `terminal` — nothing
 *   happened and repeating the same request cannot succeed, so the failure is stored and replayed;
 * - any other refusal before acting (503 `X-Fail: before`, connection refused, 408, 429): `not_applied` —
 *   nothing happened, retry;
 * - everything else (a timeout, a lost connection, a 500): `unknown` — the provider may have acted, so the
 *   next attempt reconciles instead of firing again.
 * PaymentsClient also marks every 4xx `refusedBeforeActing`, so the declined-card check comes first.
 */
export function classifyPaymentsError(error: unknown): ErrorClass {
  if (!isPaymentsError(error)) return "unknown";
  const { status } = error;
  if (status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429) {
    return "terminal";
  }
  return error.refusedBeforeActing ? "not_applied" : "unknown";
}

// By shape rather than instanceof: a second copy of @once/payments in a bundle must classify the same.
function isPaymentsError(error: unknown): error is PaymentsError {
  return (
    error instanceof Error &&
    error.name === "PaymentsError" &&
    typeof (error as { refusedBeforeActing?: unknown }).refusedBeforeActing === "boolean"
  );
}
