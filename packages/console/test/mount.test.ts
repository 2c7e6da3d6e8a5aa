// The console mounted in a team's own app, the way bull-board is: in Express (through toNodeListener) and in
// Hono (its fetch handler as it is), each under a path of the app's choosing, next to the app's own routes.

import http from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, rawRequest, redisUrl } from "@once/support";
import express from "express";
import { Hono } from "hono";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createConsole, toNodeListener } from "../src/index.js";

import { seedDone, seedUnknown } from "./seed.js";
import { Session } from "./session.js";

let redis: Redis;
let store: RedisStore;
const prefix = randomPrefix("console-mount");
const done: string[] = [];
let unknownKey: string;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  redis = new Redis(redisUrl());
  store = await RedisStore.create({ redis, prefix });
  for (let i = 0; i < 30; i++)
    done.push(await seedDone(store, { tool: "send_email" }, { messageId: `m${i}` }));
  unknownKey = await seedUnknown(
    store,
    { tool: "charge_card" },
    { name: "TimeoutError", message: "timeout" },
  );
});

afterAll(async () => {
  for (const close of closers) await close();
  await cleanupPrefix(redis, prefix);
  await redis.quit();
});

function listen(server: http.Server): Promise<string> {
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    );
  });
}

/** Every key the list shows, page after page, following its "next page" links. */
async function everyKeyListed(session: Session, first: string): Promise<{ keys: string[]; pages: number }> {
  const keys: string[] = [];
  let next: string | undefined = first;
  let pages = 0;
  while (next !== undefined) {
    const page = await (await session.fetch(next)).text();
    pages++;
    for (const match of page.matchAll(/<td class="key"><a href="[^"]*\/records\/([0-9a-f]{64})"/g))
      keys.push(match[1] ?? "");
    next = /<a href="([^"]+)" rel="next">/.exec(page)?.[1]?.replaceAll("&amp;", "&");
  }
  return { keys, pages };
}

describe("mounted in Express under /ops/once", () => {
  let origin: string;

  beforeAll(async () => {
    const app = express();
    app.get("/", (_req, res) => {
      res.send("the team's own app");
    });
    app.use(
      "/ops/once",
      toNodeListener(
        createConsole({
          redis,
          prefix,
          basePath: "/ops/once",
          pageSize: 3,
          commandOptions: `--prefix ${prefix}`,
        }),
      ),
    );
    const server = http.createServer(app);
    origin = await listen(server);
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  });

  it("serves its pages, links and assets under the mount path, and leaves the app's routes alone", async () => {
    const session = new Session(origin);
    expect(await (await session.fetch("/")).text()).toBe("the team's own app");
    const overview = await session.fetch("/ops/once/");
    expect(overview.status).toBe(200);
    expect(overview.headers.get("content-security-policy")).toContain("script-src 'self'");
    const html = await overview.text();
    expect(html).toContain('href="/ops/once/assets/console.css"');
    expect(html).toContain('href="/ops/once/records?state=unknown"');
    expect((await session.fetch("/ops/once/assets/console.js")).headers.get("content-type")).toContain(
      "text/javascript",
    );
    const record = await (await session.fetch(`/ops/once/records/${unknownKey}`)).text();
    expect(record).toContain("charge_card");
    expect(record).toContain("This console is read-only");
    expect(record).toContain(`once resolve ${unknownKey} --prefix ${prefix} --not-applied`);
  });

  it("pages through every record with SCAN's cursor, each once", async () => {
    const { keys, pages } = await everyKeyListed(new Session(origin), "/ops/once/records?state=done");
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys.sort()).toEqual([...done].sort());
    expect(pages).toBeGreaterThanOrEqual(3);
  });

  it("refuses to resolve: read-only", async () => {
    const session = new Session(origin);
    await session.fetch(`/ops/once/records/${unknownKey}`);
    const refused = await session.post(`/ops/once/records/${unknownKey}/resolve`, {
      csrf: session.cookies.get("once_console_csrf") ?? "",
      as: "not_applied",
      by: "x",
      why: "y",
      fence: "1",
    });
    expect(refused.status).toBe(403);
    expect((await store.get(unknownKey))?.state).toBe("unknown");
  });
});

describe("mounted in Hono under /ops/once, with the app's own authorize hook", () => {
  let origin: string;

  beforeAll(async () => {
    const app = new Hono();
    app.get("/", (c) => c.text("the team's own app"));
    app.mount(
      "/ops/once",
      createConsole({
        redis,
        prefix,
        basePath: "/ops/once",
        allowWrites: true,
        // The app knows who is asking (here from a header its proxy sets); only on-call may resolve.
        authorize: (request, action) => {
          const user = request.headers.get("x-user");
          if (user === null) return false;
          if (action === "resolve") return user === "alice" ? { user } : false;
          return true;
        },
      }),
    );
    const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
    await new Promise<void>((resolve) => server.once("listening", () => resolve()));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  });

  it("lets the hook refuse a reader, and a resolver it does not know", async () => {
    expect(await (await fetch(`${origin}/`)).text()).toBe("the team's own app");
    expect((await fetch(`${origin}/ops/once/`)).status).toBe(403);
    const bob = new Session(origin, { "x-user": "bob" });
    const page = await (await bob.fetch(`/ops/once/records/${unknownKey}`)).text();
    expect(page).toContain("You may not resolve records here");
    const refused = await bob.post(`/ops/once/records/${unknownKey}/resolve`, {
      csrf: bob.cookies.get("once_console_csrf") ?? "",
      as: "not_applied",
      by: "bob",
      why: "y",
      fence: "1",
    });
    expect(refused.status).toBe(403);
    expect((await store.get(unknownKey))?.state).toBe("unknown");
  });

  it("resolves as the user the hook names, fenced, and keeps who and why", async () => {
    const alice = new Session(origin, { "x-user": "alice" });
    const page = await (await alice.fetch(`/ops/once/records/${unknownKey}`)).text();
    expect(page).toContain("writes allowed · alice");
    const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1] ?? "";
    // A stale fence is refused by the store and changes nothing.
    const stale = await alice.post(`/ops/once/records/${unknownKey}/resolve`, {
      csrf,
      as: "failed",
      error: "card declined",
      by: "mallory",
      why: "support ticket 881",
      fence: "0",
    });
    expect(stale.status).toBe(409);
    expect(await stale.text()).toContain("the record moved on (fence 1, 0 seen)");
    const resolved = await alice.post(`/ops/once/records/${unknownKey}/resolve`, {
      csrf,
      as: "failed",
      error: "card declined",
      code: "card_declined",
      by: "mallory",
      why: "support ticket 881",
      fence: "1",
    });
    expect(resolved.status).toBe(303);
    expect(resolved.headers.get("location")).toBe(`/ops/once/records/${unknownKey}?resolved=failed`);
    expect(await store.get(unknownKey)).toMatchObject({
      state: "failed",
      fence: 2,
      error: { name: "Error", message: "card declined", code: "card_declined" },
      resolution: { as: "failed", by: "alice", why: "support ticket 881" },
    });
  });
});

describe("the Host check: a page on another name rebound to this address reads nothing", () => {
  const token = "h".repeat(24);
  let origin: string;
  let port: string;
  let unknown: string;
  let record: string;

  /** A console served by node:http on 127.0.0.1, as a host app would mount it, with the options given. */
  async function served(options: { allowedHosts?: string[] } = {}): Promise<string> {
    const server = http.createServer(
      toNodeListener(createConsole({ redis, prefix, allowWrites: true, token, ...options })),
    );
    const at = await listen(server);
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    return at;
  }

  beforeAll(async () => {
    origin = await served();
    port = new URL(origin).port;
    unknown = await seedUnknown(store, { tool: "refund" }, { name: "TimeoutError", message: "timeout" });
    record = done[0] ?? "";
  });

  it("refuses every page and asset with 421 when Host is another name, and says how to allow it", async () => {
    for (const path of ["/", `/records/${record}`, "/records?state=done", "/assets/console.js", "/login"]) {
      for (const host of ["evil.example", `evil.example:${port}`]) {
        const refused = await rawRequest(origin, path, { host });
        expect(refused.status, `${host} ${path}`).toBe(421);
        expect(refused.headers["content-type"]).toBe("text/plain; charset=utf-8");
        expect(refused.body).toContain(`does not answer to the host "${host}" (Host)`);
        expect(refused.body).toContain(`--allowed-hosts ${host}`);
        expect(refused.body).toContain(`allowedHosts: ["${host}"]`);
        expect(refused.body).not.toContain("send_email");
        expect(refused.body).not.toContain("m0");
      }
    }
    // The same record under the console's own names.
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `LOCALHOST:${port}`]) {
      const page = await rawRequest(origin, `/records/${record}`, { host });
      expect(page.status, host).toBe(200);
      expect(page.body).toContain("send_email");
    }
  });

  it("is not bypassed by a forwarded host: X-Forwarded-Host and Forwarded are checked as Host is", async () => {
    const host = `127.0.0.1:${port}`;
    for (const [headers, header, named] of [
      [{ "x-forwarded-host": "evil.example" }, "X-Forwarded-Host", "evil.example"],
      [{ "x-forwarded-host": `${host}, evil.example` }, "X-Forwarded-Host", "evil.example"],
      [{ forwarded: 'for=192.0.2.1;host="evil.example:443";proto=https' }, "Forwarded", "evil.example:443"],
    ] as const) {
      const refused = await rawRequest(origin, `/records/${record}`, { host, ...headers });
      expect(refused.status, JSON.stringify(headers)).toBe(421);
      expect(refused.body).toContain(`"${named}" (${header})`);
      expect(refused.body).not.toContain("send_email");
    }
    // A forwarded name the console answers to is fine.
    expect(
      (await rawRequest(origin, `/records/${record}`, { host, "x-forwarded-host": `localhost:${port}` }))
        .status,
    ).toBe(200);
  });

  it("refuses a write under another name before it reads the form, the token notwithstanding", async () => {
    const before = await store.get(unknown);
    const refused = await rawRequest(
      origin,
      `/records/${unknown}/resolve`,
      {
        host: `evil.example:${port}`,
        authorization: `Bearer ${token}`,
        "content-type": "application/x-www-form-urlencoded",
      },
      {
        method: "POST",
        body: new URLSearchParams({ as: "not_applied", by: "x", why: "y", fence: "1" }).toString(),
      },
    );
    expect(refused.status).toBe(421);
    expect(await store.get(unknown)).toEqual({ ...before, ttlMs: expect.any(Number) });
  });

  it("answers 400, not 500, to a Host no URL can be made of", async () => {
    const refused = await rawRequest(origin, "/", { host: "evil example" });
    expect(refused.status).toBe(400);
    expect(refused.body).toContain('the Host header "evil example" is not a host');
  });

  it("answers to the names allowedHosts lists, and to those alone", async () => {
    const proxied = await served({ allowedHosts: ["ops.example.com", `127.0.0.1:${port}`] });
    const at = new URL(proxied).port;
    for (const host of ["ops.example.com", "ops.example.com:8443"])
      expect((await rawRequest(proxied, `/records/${record}`, { host })).status, host).toBe(200);
    // The default is replaced, not added to; and 127.0.0.1 was listed on another port only.
    for (const host of [`localhost:${at}`, `127.0.0.1:${at}`, "evil.example"])
      expect((await rawRequest(proxied, `/records/${record}`, { host })).status, host).toBe(421);
    // Behind a proxy that passes the browser's host, that host must be listed too.
    const behindProxy = await served({ allowedHosts: ["127.0.0.1", "ops.example.com"] });
    const proxyHost = `127.0.0.1:${new URL(behindProxy).port}`;
    expect(
      (await rawRequest(behindProxy, "/", { host: proxyHost, "x-forwarded-host": "ops.example.com" })).status,
    ).toBe(200);
    expect(
      (await rawRequest(behindProxy, "/", { host: proxyHost, "x-forwarded-host": "evil.example" })).status,
    ).toBe(421);
  });

  it("refuses an allowedHosts entry that is not a host, at creation", () => {
    for (const entry of ["https://ops.example.com", "ops.example.com/once", "*", "ops example", "user@ops"])
      expect(() => createConsole({ redis, prefix, allowedHosts: [entry] }), entry).toThrow(
        new RangeError(
          `allowedHosts: ${JSON.stringify(entry)} is not a host: give a name or an address, with a port or ` +
            "without (ops.example.com for any port, ops.example.com:8443, 10.0.0.5:4100, [::1]:4100)",
        ),
      );
    expect(() => createConsole({ redis, prefix, allowedHosts: [] })).toThrow(
      "allowedHosts lists no host: the console would refuse every request",
    );
  });
});

describe("the login's next: a page of this console on its own origin, or the overview", () => {
  const token = "n".repeat(24);

  /** A console with a login, on node:http, under `basePath`. */
  async function served(basePath: string): Promise<string> {
    const server = http.createServer(
      toNodeListener(createConsole({ redis, prefix, basePath, allowWrites: true, token })),
    );
    const at = await listen(server);
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    return at;
  }

  /**
   * Logs in with each `next` as the form sends it, and expects a 303 to the path paired with it, which a
   * browser resolves on the console's own origin.
   */
  async function expectLandings(origin: string, base: string, cases: readonly (readonly [string, string])[]) {
    for (const [next, path] of cases) {
      const session = new Session(origin);
      expect((await session.fetch(`${base}/login`)).status).toBe(200);
      const answer = await session.post(`${base}/login`, {
        csrf: session.cookies.get("once_console_csrf") ?? "",
        token,
        next,
      });
      const location = answer.headers.get("location");
      expect({ next, status: answer.status, location }).toEqual({ next, status: 303, location: path });
      expect(new URL(location ?? "", origin).origin).toBe(origin);
    }
  }

  // Each is read by a URL parser (a browser's) as another origin, or is no URL of this console at all.
  const elsewhere = [
    "/\t/other-host/",
    "/\n/other-host/",
    "/\r\n/other-host/",
    "\t//other-host/",
    "//other-host/",
    "///other-host/",
    "/\\other-host/",
    "/\\\\other-host/",
    "\\\\other-host/",
    "\\/other-host/",
    "/records/../..//other-host/",
    "/.//other-host/",
    "javascript:alert(document.domain)",
    "JavaScript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "http://other-host/",
    "https://other-host/records",
    "http://127.0.0.1.other-host/",
  ];

  it("drops every next that leads off the console's origin, answering the overview, never a 500", async () => {
    const origin = await served("");
    await expectLandings(
      origin,
      "",
      elsewhere.map((next) => [next, "/"]),
    );
  });

  it("keeps a next that is a page of this console, as the parser reads it", async () => {
    const origin = await served("");
    await expectLandings(origin, "", [
      ["/records?state=unknown#list", "/records?state=unknown#list"],
      ["/records/./x/../", "/records/"],
      // Encoded, a slash or a tab is a character of the path: the browser stays on this origin.
      ["/%2F%2Fother-host/", "/%2F%2Fother-host/"],
      ["/%09/other-host/", "/%09/other-host/"],
      ["/%5Cother-host/", "/%5Cother-host/"],
      ["/records/ x\u00e9", "/records/%20x%C3%A9"],
      [`${origin}/records`, "/records"],
      // Same scheme, no slashes: a parser reads a relative path, on this origin.
      ["http:other-host", "/other-host"],
    ]);
  });

  it("under a base path, keeps only the console's own pages", async () => {
    const origin = await served("/ops/once");
    await expectLandings(origin, "/ops/once", [
      ["/ops/once/records", "/ops/once/records"],
      ["/ops/once/../admin", "/ops/once/"],
      ["/ops/once/%2e%2e/admin", "/ops/once/"],
      ["/ops/oncex", "/ops/once/"],
      ["/admin", "/ops/once/"],
      ["/ops/once/\t/x", "/ops/once//x"],
      ["//other-host/ops/once/", "/ops/once/"],
    ]);
  });

  it("puts only the checked next in the login form it serves", async () => {
    const origin = await served("");
    const session = new Session(origin);
    for (const next of ["/\t/other-host/", "/\n/x", "javascript:alert(1)"]) {
      const page = await session.fetch(`/login?next=${encodeURIComponent(next)}`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('name="next" value="/"');
    }
    const kept = await session.fetch(`/login?next=${encodeURIComponent("/records?state=unknown")}`);
    expect(await kept.text()).toContain('name="next" value="/records?state=unknown"');
  });
});

describe("bad input to a page or an option is named, never a 500", () => {
  it("answers 404 to a record path whose escape is broken", async () => {
    const errors: unknown[] = [];
    const server = http.createServer(
      toNodeListener(createConsole({ redis, prefix, onError: (error) => errors.push(error) })),
    );
    const origin = await listen(server);
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    for (const path of ["/records/%E0%A4%A", "/records/%zz", "/records/abc"]) {
      const response = await fetch(origin + path);
      expect(response.status, path).toBe(404);
    }
    expect(errors).toEqual([]);
  });

  it("refuses a jaegerUrl that is no http(s) URL, naming it", () => {
    for (const jaegerUrl of ["http://[::1", "localhost:16686", "javascript:alert(1)", "ftp://jaeger"])
      expect(() => createConsole({ redis, prefix, jaegerUrl }), jaegerUrl).toThrow(
        new RangeError(`jaegerUrl ${JSON.stringify(jaegerUrl)} must be an http:// or https:// URL`),
      );
  });
});
