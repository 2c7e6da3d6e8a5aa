import { PaymentsError } from "./errors.js";
import type {
  Charge,
  ChargeInput,
  EffectQuery,
  Email,
  EmailInput,
  LedgerSnapshot,
  Ticket,
  TicketInput,
} from "./types.js";

export interface PaymentsRequestOptions {
  /** Sent as `Idempotency-Key`; only a server started with `honourIdempotencyKey` acts on it. */
  idempotencyKey?: string;
  signal?: AbortSignal;
  /** Extra headers, e.g. `{ "X-Latency-Ms": "5000" }` or `{ "X-Fail": "after" }`. */
  headers?: Record<string, string>;
}

/** A typed client for the provider stand-in, on global fetch; every failure is a `PaymentsError`. */
export class PaymentsClient {
  readonly #baseUrl: string;

  constructor(baseUrl: string | URL) {
    this.#baseUrl = String(baseUrl).replace(/\/+$/, "");
  }

  charge(body: ChargeInput, options?: PaymentsRequestOptions): Promise<Charge> {
    return this.#request("POST", "/charges", body, options);
  }

  async findCharges(query: EffectQuery = {}, options?: PaymentsRequestOptions): Promise<Charge[]> {
    return (await this.#request<{ data: Charge[] }>("GET", `/charges${toSearch(query)}`, undefined, options))
      .data;
  }

  sendEmail(body: EmailInput, options?: PaymentsRequestOptions): Promise<Email> {
    return this.#request("POST", "/emails", body, options);
  }

  async findEmails(query: EffectQuery = {}, options?: PaymentsRequestOptions): Promise<Email[]> {
    return (await this.#request<{ data: Email[] }>("GET", `/emails${toSearch(query)}`, undefined, options))
      .data;
  }

  createTicket(body: TicketInput, options?: PaymentsRequestOptions): Promise<Ticket> {
    return this.#request("POST", "/tickets", body, options);
  }

  async findTickets(query: EffectQuery = {}, options?: PaymentsRequestOptions): Promise<Ticket[]> {
    return (await this.#request<{ data: Ticket[] }>("GET", `/tickets${toSearch(query)}`, undefined, options))
      .data;
  }

  ledger(options?: PaymentsRequestOptions): Promise<LedgerSnapshot> {
    return this.#request("GET", "/ledger", undefined, options);
  }

  async reset(options?: PaymentsRequestOptions): Promise<void> {
    await this.#request("POST", "/reset", undefined, options);
  }

  async #request<T>(
    method: string,
    path: string,
    body: unknown,
    options: PaymentsRequestOptions = {},
  ): Promise<T> {
    const headers: Record<string, string> = { ...options.headers };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (options.idempotencyKey !== undefined) headers["Idempotency-Key"] = options.idempotencyKey;
    const where = `${method} ${path}`;
    let response: Response;
    let text: string;
    try {
      response = await fetch(`${this.#baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: options.signal,
      });
      text = await response.text();
    } catch (error) {
      throw transportError(where, error, options.signal);
    }
    if (response.ok) return (text === "" ? undefined : JSON.parse(text)) as T;
    const message = errorMessage(text) ?? response.statusText;
    // 4xx and 503 are this provider's ways of saying "I did nothing"; any other 5xx leaves the outcome open.
    const refused = response.status < 500 || response.status === 503;
    throw new PaymentsError(`${where} failed with ${response.status}: ${message}`, {
      code: refused ? "refused" : "server_error",
      status: response.status,
    });
  }
}

function transportError(where: string, error: unknown, signal: AbortSignal | undefined): PaymentsError {
  if (signal?.aborted) {
    return new PaymentsError(`${where} aborted; the provider may still act on it`, {
      code: "aborted",
      cause: error,
    });
  }
  // undici reports the socket error as the cause; a refused connection never reached the provider.
  const causeCode = (error as { cause?: { code?: unknown } } | undefined)?.cause?.code;
  if (causeCode === "ECONNREFUSED") {
    return new PaymentsError(`${where}: connection refused`, { code: "refused", cause: error });
  }
  return new PaymentsError(`${where}: connection lost before an answer`, {
    code: "connection_lost",
    cause: error,
  });
}

function errorMessage(text: string): string | undefined {
  try {
    const parsed = JSON.parse(text) as { error?: unknown };
    return typeof parsed.error === "string" ? parsed.error : undefined;
  } catch {
    return text === "" ? undefined : text;
  }
}

function toSearch(query: EffectQuery): string {
  const params = new URLSearchParams();
  if (query.orderId !== undefined) params.set("orderId", query.orderId);
  for (const [key, value] of Object.entries(query.metadata ?? {})) params.set(`metadata.${key}`, value);
  const search = params.toString();
  return search === "" ? "" : `?${search}`;
}
