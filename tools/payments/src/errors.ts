/**
 * - `refused`: the provider said no before acting (any 4xx, or 503 from `X-Fail: before`), or the connection
 *   was refused; nothing happened, so a retry is safe even without an idempotency key.
 * - `server_error`: another 5xx; the effect may or may not have happened.
 * - `connection_lost`: the connection broke before an answer (e.g. `X-Fail: after`); outcome unknown.
 * - `aborted`: the caller's signal fired (typically a timeout); outcome unknown — the provider may still act.
 */
export type PaymentsErrorCode = "refused" | "server_error" | "connection_lost" | "aborted";

/** Every failure of `PaymentsClient`: `refusedBeforeActing` tells "not applied" from "unknown outcome". */
export class PaymentsError extends Error {
  override readonly name = "PaymentsError";
  readonly code: PaymentsErrorCode;
  /** The HTTP status, when the provider answered at all. */
  readonly status: number | undefined;
  readonly refusedBeforeActing: boolean;

  constructor(message: string, options: { code: PaymentsErrorCode; status?: number; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.code = options.code;
    this.status = options.status;
    this.refusedBeforeActing = options.code === "refused";
  }
}
