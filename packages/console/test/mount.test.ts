// The console mounted in a team's own app, the way bull-board is: in Express (through toNodeListener) and in
// Hono (its fetch handler as it is), each under a path of the app's choosing, next to the app's own routes.

import http from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import express from "express";
import { Hono } from "hono";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createConsole, toNodeListener } from "../src/index.js";
import { seedDone, seedUnknown } from "./seed.js";

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

/** A browser's cookie jar, just enough for the console's two cookies. */
class Session {
  readonly cookies = new Map<string, string>();
  constructor(
    readonly origin: string,
    readonly headers: Record<string, string> = {},
  ) {}
  async fetch(path: string, init: RequestInit = {}): Promise<Response> {
    const response = await fetch(this.origin + path, {
      ...init,
      redirect: "manual",
      headers: {
        ...this.headers,
        ...(init.headers as Record<string, string>),
        cookie: [...this.cookies].map(([name, value]) => `${name}=${value}`).join("; "),
      },
    });
    for (const cookie of response.headers.getSetCookie()) {
      const [pair] = cookie.split(";");
      const [name, value] = (pair ?? "").split("=");
      if (name !== undefined && value !== undefined) this.cookies.set(name, value);
    }
    return response;
  }
  post(path: string, fields: Record<string, string>): Promise<Response> {
    return this.fetch(path, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: this.origin },
      body: new URLSearchParams(fields).toString(),
    });
  }
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
