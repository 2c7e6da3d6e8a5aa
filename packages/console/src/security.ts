import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

// The console's defences, in one place: who may write (a token turned into a session cookie, or the host
// app's own authorize hook), and that a write came from the console's own page (CSRF).

export const CSRF_COOKIE = "once_console_csrf";
export const SESSION_COOKIE = "once_console_session";
/** How long a login lasts. */
export const SESSION_MAX_AGE_S = 12 * 60 * 60;

/** The cookies of a request, by name (the first of a repeated name). */
export function cookiesOf(request: Request): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (request.headers.get("cookie") ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    if (name !== "" && !cookies.has(name)) cookies.set(name, part.slice(eq + 1).trim());
  }
  return cookies;
}

export interface CookieSettings {
  path: string;
  secure: boolean;
}

/** A Set-Cookie value: HttpOnly and SameSite=Strict always, Secure over https. */
export function setCookie(
  name: string,
  value: string,
  settings: CookieSettings,
  maxAgeSeconds?: number,
): string {
  return [
    `${name}=${value}`,
    `Path=${settings.path}`,
    "HttpOnly",
    "SameSite=Strict",
    ...(settings.secure ? ["Secure"] : []),
    ...(maxAgeSeconds === undefined ? [] : [`Max-Age=${maxAgeSeconds}`]),
  ].join("; ");
}

/** A fresh random value for the CSRF cookie. */
export function newCsrfToken(): string {
  return randomBytes(32).toString("base64url");
}

/** True when both are the same string, compared in constant time. */
export function sameSecret(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/**
 * Whether a write is the console's own form, posted from its own page: the form's `csrf` field equals the
 * CSRF cookie (which another site can neither read nor set: HttpOnly, SameSite=Strict), and the browser's
 * Origin and Sec-Fetch-Site headers, when sent, say the same origin.
 */
export function csrfProblem(request: Request, formToken: string | null): string | undefined {
  const cookie = cookiesOf(request).get(CSRF_COOKIE);
  if (cookie === undefined || formToken === null || !sameSecret(cookie, formToken))
    return "the form's CSRF token does not match this browser's";
  const site = request.headers.get("sec-fetch-site");
  if (site !== null && site !== "same-origin" && site !== "none") return `the request came from ${site}`;
  const origin = request.headers.get("origin");
  if (origin !== null && origin !== "null") {
    let host: string | undefined;
    try {
      host = new URL(origin).host;
    } catch {
      host = undefined;
    }
    // Behind a proxy that rewrites Host, the browser's host is the one the proxy forwards.
    const ours = [new URL(request.url).host, request.headers.get("x-forwarded-host")];
    if (host === undefined || !ours.includes(host)) return "the request came from another origin";
  } else if (origin === "null") {
    return "the request came from an opaque origin";
  }
  return undefined;
}

/**
 * The session cookie's value for a token: an HMAC of it, so the cookie never holds the token itself. Anyone
 * with the token can compute it, which is no more than the token allows.
 */
export function sessionFor(token: string): string {
  return createHmac("sha256", token).update("once-console-session/1").digest("base64url");
}

/** True when the request carries the token: `Authorization: Bearer <token>`, or the login's session cookie. */
export function hasToken(request: Request, token: string): boolean {
  const header = request.headers.get("authorization");
  if (header?.startsWith("Bearer ")) return sameSecret(header.slice("Bearer ".length).trim(), token);
  const session = cookiesOf(request).get(SESSION_COOKIE);
  return session !== undefined && sameSecret(session, sessionFor(token));
}
