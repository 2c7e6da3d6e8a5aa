import { StoreUnavailableError } from "@once/core";
import { type Html, raw } from "./html.js";
import { layout, type PageContext, unreachableBanner } from "./views.js";

/** No inline script or style, no other origin, no framing: a record's content cannot run in the page. */
const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
  "cache-control": "no-store",
};

/** A plain-text answer, with the security headers every answer carries. */
export function plain(status: number, text: string): Response {
  return new Response(`${text}\n`, {
    status,
    headers: { "content-type": "text/plain; charset=utf-8", ...SECURITY_HEADERS },
  });
}

/** Nothing yet: what a page shows in its live part before the store has answered. */
export function emptyLive(): Html {
  return raw("");
}

/** Why the store did not answer, in words fit for a page: the cause's message, never a URL's password. */
export function unavailableReason(error: StoreUnavailableError): string {
  const cause = error.cause instanceof Error ? error.cause.message : error.message;
  return cause.replace(/\/\/[^@/\s]*@/g, "//");
}

/**
 * How one request to a page is answered: every answer gets the security headers and the cookies set while
 * handling it; `live` (the page's script asking for its live part) answers that part alone.
 */
export class Reply {
  readonly #cookies: string[] = [];

  constructor(
    readonly ctx: PageContext,
    readonly live: boolean,
  ) {}

  /** A Set-Cookie for whatever this request answers. */
  setCookie(cookie: string): void {
    this.#cookies.push(cookie);
  }

  html(status: number, body: Html, headers: Record<string, string> = {}): Response {
    return this.#finish(
      new Response(body.text, {
        status,
        headers: { "content-type": "text/html; charset=utf-8", ...headers },
      }),
    );
  }

  /** A whole page: the layout around `body`, with a banner above it if given. */
  page(status: number, title: string, body: Html, banner?: Html): Response {
    return this.html(status, layout(this.ctx, { title, body, ...(banner === undefined ? {} : { banner }) }));
  }

  /** 303 to a page of the console. */
  redirect(location: string): Response {
    return this.#finish(new Response(null, { status: 303, headers: { location } }));
  }

  /** Runs a read of the store; while it does not answer, the page (or its live part) says so, with a 503. */
  async reading(title: string, read: () => Promise<Html>, wrap: (live: Html) => Html): Promise<Response> {
    try {
      const part = await read();
      return this.live ? this.html(200, part) : this.page(200, title, wrap(part));
    } catch (error) {
      if (!(error instanceof StoreUnavailableError)) throw error;
      const reason = unavailableReason(error);
      if (this.live)
        return this.html(503, unreachableBanner(this.ctx, reason, true), { "x-once-store": "unreachable" });
      return this.page(503, title, wrap(emptyLive()), unreachableBanner(this.ctx, reason, false));
    }
  }

  #finish(response: Response): Response {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) response.headers.set(name, value);
    for (const cookie of this.#cookies) response.headers.append("set-cookie", cookie);
    return response;
  }
}
