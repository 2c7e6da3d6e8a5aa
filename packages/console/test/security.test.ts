import os from "node:os";
import { describe, expect, it } from "vitest";
import { hostsServedAt } from "../src/allowed-hosts.js";
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

describe("hostsServedAt", () => {
  it("names the loopback names for a loopback address, with the port", () => {
    const loopback = ["localhost:4100", "127.0.0.1:4100", "[::1]:4100"];
    expect(hostsServedAt("127.0.0.1", 4100)).toEqual(loopback);
    expect(hostsServedAt("localhost", 4100)).toEqual(loopback);
    expect(hostsServedAt("::1", 4100)).toEqual(loopback);
    expect(hostsServedAt("127.0.0.2", 4100)).toEqual([...loopback, "127.0.0.2:4100"]);
  });

  it("names the address itself for another one, and this machine's addresses for a wildcard", () => {
    expect(hostsServedAt("10.0.0.5", 8080)).toEqual(["10.0.0.5:8080"]);
    expect(hostsServedAt("fd00::5", 8080)).toEqual(["[fd00::5]:8080"]);
    const own = Object.values(os.networkInterfaces())
      .flat()
      .filter((nic) => nic !== undefined && nic.scopeid === undefined)
      .map((nic) => (nic?.family === "IPv6" ? `[${nic.address}]:8080` : `${nic?.address}:8080`));
    const wildcard = hostsServedAt("0.0.0.0", 8080);
    expect(wildcard).toEqual(expect.arrayContaining(["localhost:8080", "0.0.0.0:8080", ...own]));
    expect(wildcard.every((host) => host.endsWith(":8080"))).toBe(true);
  });
});
