import { describe, expect, it } from "vitest";
import { html, raw } from "../src/html.js";
import { CSRF_COOKIE, csrfProblem, hasToken, SESSION_COOKIE, sessionFor } from "../src/security.js";

const CSRF = "c".repeat(43);

function post(headers: Record<string, string>): Request {
  return new Request("http://console.internal:4100/records/x/resolve", { method: "POST", headers });
}

describe("html", () => {
  it("escapes every value, in text and in attributes, and leaves Html as it is", () => {
    const value = `"><script>alert('x')</script>&`;
    expect(html`<td title="${value}">${value}</td>${raw("<br>")}${[value, 1]}`.text).toBe(
      '<td title="&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;">' +
        "&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;</td><br>" +
        "&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;1",
    );
  });
});

describe("csrfProblem", () => {
  const cookie = `${CSRF_COOKIE}=${CSRF}`;

  it("accepts the console's own form: the field equals the cookie, from the same origin", () => {
    expect(csrfProblem(post({ cookie }), CSRF)).toBeUndefined();
    expect(
      csrfProblem(
        post({ cookie, origin: "http://console.internal:4100", "sec-fetch-site": "same-origin" }),
        CSRF,
      ),
    ).toBeUndefined();
    // Behind a proxy that rewrote Host.
    expect(
      csrfProblem(post({ cookie, origin: "https://ops.example", "x-forwarded-host": "ops.example" }), CSRF),
    ).toBeUndefined();
  });

  it("refuses a missing or different token, another site, another origin and an opaque one", () => {
    expect(csrfProblem(post({}), CSRF)).toMatch(/does not match/);
    expect(csrfProblem(post({ cookie }), null)).toMatch(/does not match/);
    expect(csrfProblem(post({ cookie }), "d".repeat(43))).toMatch(/does not match/);
    expect(csrfProblem(post({ cookie, "sec-fetch-site": "cross-site" }), CSRF)).toBe(
      "the request came from cross-site",
    );
    expect(csrfProblem(post({ cookie, origin: "https://evil.example" }), CSRF)).toBe(
      "the request came from another origin",
    );
    expect(csrfProblem(post({ cookie, origin: "null" }), CSRF)).toBe(
      "the request came from an opaque origin",
    );
  });
});

describe("hasToken", () => {
  const token = "t".repeat(24);

  it("takes the bearer token or the login's cookie, which holds an HMAC of the token, not the token", () => {
    expect(sessionFor(token)).not.toContain(token);
    expect(hasToken(post({ authorization: `Bearer ${token}` }), token)).toBe(true);
    expect(hasToken(post({ cookie: `${SESSION_COOKIE}=${sessionFor(token)}` }), token)).toBe(true);
    expect(hasToken(post({ authorization: "Bearer nope" }), token)).toBe(false);
    expect(hasToken(post({ cookie: `${SESSION_COOKIE}=${token}` }), token)).toBe(false);
    expect(hasToken(post({}), token)).toBe(false);
  });
});
