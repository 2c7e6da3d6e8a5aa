// The console in a real browser (Debian's Chromium through playwright-core), served by the built `once console`
// on a redis-server of this test's own, which it stops and starts again. It also writes the screenshots the
// README shows: into reports/screenshots/, or docs/images/ with UPDATE_SCREENSHOTS=1.

import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { defineTool, effectKey, OutcomeUnknownError } from "@once/core";
import { InProcess } from "@once/engine";
import { RedisOperatorStore, RedisStore } from "@once/redis";
import {
  NodeChild,
  type RedisServerHandle,
  rawRequest,
  startRedisServer,
  stopAllRedisServers,
} from "@once/support";
import { Redis } from "ioredis";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createConsole, toNodeListener } from "../src/index.js";
import { type Browser, launchBrowser } from "./browser.js";

import {
  randomTraceparent,
  seedAwaitingApproval,
  seedClaimed,
  seedDone,
  seedFailed,
  seedReconciling,
  seedReleased,
  seedTask,
  seedUnknown,
} from "./seed.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const CLI = path.resolve(here, "../../cli/dist/main.js");
const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS
  ? path.resolve(here, "../../../docs/images")
  : path.resolve(here, "../reports/screenshots");
const TOKEN = randomBytes(24).toString("hex");
const JAEGER = "http://localhost:16686";
// The redis-server is this test's own, so the store can have the default prefix.
const PREFIX = "once:";

let server: RedisServerHandle;
let redis: Redis;
let store: RedisStore;
let consoleChild: NodeChild;
let url: string;
let browser: Browser;
/** Logged in with the token. */
let operator: BrowserContext;
/** Not logged in. */
let stranger: BrowserContext;
const keys = { claimed: "", traced: "", unknown: "", later: "" };

// The tool whose unknown call the operator resolves: its first run dies mid-effect, so once cannot know.
let runs = 0;
const chargeCard = defineTool({
  name: "charge_card",
  kind: "effect",
  input: z.object({ orderId: z.string(), amount: z.number().int().positive() }),
  output: z.object({ chargeId: z.string() }),
  run: async () => {
    runs++;
    throw new Error("socket hang up after the request was sent");
  },
});
let inProcess: InProcess;

async function callUnknown(taskId: string): Promise<string> {
  const call = inProcess.call(chargeCard, { orderId: taskId, amount: 1200 }, { taskId, stepId: "charge" });
  await expect(call).rejects.toBeInstanceOf(OutcomeUnknownError);
  const key = effectKey(chargeCard.name, { namespace: "default", taskId, stepId: "charge" });
  expect((await store.get(key))?.state).toBe("unknown");
  return key;
}

async function shot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/** Starts the built `once console` (with `extraArgs`) and resolves with the URL it printed. */
async function startConsole(extraArgs: string[] = []): Promise<{ child: NodeChild; url: string }> {
  let announced: (url: string) => void = () => {};
  const printed = new Promise<string>((resolve) => {
    announced = resolve;
  });
  const child = NodeChild.start({
    script: CLI,
    name: "once console",
    args: [
      "console",
      ...["--port", "0", "--redis-url", server.url, "--prefix", PREFIX],
      ...["--allow-writes", "--jaeger-url", JAEGER, "--refresh", "500ms"],
      ...extraArgs,
    ],
    env: { ...process.env, ONCE_CONSOLE_TOKEN: TOKEN },
    onOutput: (line) => {
      const found = /^once console on (http:\/\/\S+?)\/ /.exec(line);
      if (found?.[1] !== undefined) announced(found[1]);
    },
  });
  const started = await Promise.race([
    printed,
    child.exited.then((status) => {
      throw new Error(`once console exited (${status}) before it listened:\n${child.stderr()}`);
    }),
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error("once console never listened")), 20_000),
    ),
  ]);
  return { child, url: started };
}

beforeAll(async () => {
  // AOF on: the records outlive the stop and the restart below.
  server = await startRedisServer({ appendonly: true, appendfsync: "always" });
  redis = new Redis(server.url, { maxRetriesPerRequest: null });
  store = await RedisStore.create({ redis, prefix: PREFIX, retentionMs: 24 * 60 * 60 * 1000 });
  inProcess = new InProcess({ store, tools: [chargeCard], attempts: 1 });

  // A morning's worth of records: mostly done, a few stuck.
  for (const [tool, n, result] of [
    ["charge_card", 6, (i: number) => ({ chargeId: `ch_${3100 + i}` })],
    ["send_email", 4, (i: number) => ({ messageId: `msg_${880 + i}` })],
    ["book_flight", 3, (i: number) => ({ pnr: `K${i}X9TQ` })],
  ] as const) {
    for (let i = 0; i < n; i++) await seedDone(store, { tool, trace: randomTraceparent() }, result(i));
  }
  await seedFailed(
    store,
    { tool: "charge_card" },
    { name: "CardDeclinedError", message: "card declined", code: "card_declined" },
  );
  keys.claimed = await seedClaimed(store, {
    tool: "send_email",
    leaseMs: 10 * 60_000,
    trace: randomTraceparent(),
  });
  await seedReconciling(store, { tool: "create_refund" });
  await seedReleased(store, { tool: "book_flight" });
  keys.traced = await seedUnknown(
    store,
    { tool: "create_refund", trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" },
    { name: "TimeoutError", message: "no answer from the provider within 30s" },
  );
  keys.unknown = await callUnknown("order-1042");

  ({ child: consoleChild, url } = await startConsole());
  browser = launchBrowser();
  operator = await browser.context();
  stranger = await browser.context();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await consoleChild?.stop();
  redis?.disconnect();
  await stopAllRedisServers();
});

async function open(context: BrowserContext, pathname: string): Promise<Page> {
  const page = await context.newPage();
  page.on("dialog", (dialog) => {
    throw new Error(`the page opened a dialog: ${dialog.message()}`);
  });
  await page.goto(url + pathname);
  return page;
}

describe("the console in Chromium", () => {
  it("shows the counts by state and by tool", async () => {
    const page = await open(stranger, "/");
    await expect.poll(() => page.locator(".card-unknown .count").textContent()).toBe("2");
    expect(await page.locator(".card-done .count").textContent()).toBe("13");
    expect(await page.locator("header .store").textContent()).toBe(`${server.url}, prefix "once:"`);
    const chargeRow = page.locator("table.counts tr", { hasText: "charge_card" });
    // total, then claimed reconciling released done failed unknown awaiting_approval approved cancelled
    expect(await chargeRow.locator("td.num").allTextContents()).toEqual([
      "8",
      "0",
      "0",
      "0",
      "6",
      "1",
      "1",
      "0",
      "0",
      "0",
    ]);
    await expect.poll(() => page.locator("ul.attention").textContent()).toContain("2 unknown");
    await shot(page, "console-overview");
    await page.close();
  });

  it("lists records by state, tool and age, and refreshes the list without a reload", async () => {
    const page = await open(stranger, "/records?state=unknown");
    const rows = page.locator("table.records tbody tr");
    await expect.poll(() => rows.count()).toBe(2);
    expect(await rows.allTextContents()).toEqual([
      expect.stringContaining("create_refund"),
      expect.stringContaining("charge_card"),
    ]);
    // A call goes unknown while the page is open: it appears without a reload.
    let navigations = 0;
    page.on("framenavigated", () => navigations++);
    keys.later = await callUnknown("order-1043");
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(3);
    expect(navigations).toBe(0);
    // What a refresh puts in is the live part alone, not a page within the page.
    expect(await page.locator("#live header, #live script, #live form").count()).toBe(0);

    await page.goto(`${url}/records?tool=send_email&state=claimed`);
    await expect.poll(() => rows.count()).toBe(1);
    await page.goto(`${url}/records?older=1h`);
    expect(await page.locator("p.empty").textContent()).toContain("unchanged for 1h or more");
    await page.goto(`${url}/records?older=soon`);
    expect(await page.locator("p.problem").textContent()).toContain('"soon" is not a duration');

    await page.goto(`${url}/records`);
    await expect.poll(() => rows.count()).toBe(20);
    await shot(page, "console-records");
    await page.close();
  });

  it("shows one record: every field, what it means, the lease counting down, the trace in Jaeger", async () => {
    const page = await open(stranger, "/records?tool=send_email&state=claimed");
    await page.locator("table.records td.key a").click();
    await page.waitForURL(`${url}/records/${keys.claimed}`);
    const field = (name: string) => page.locator(`td[data-field="${name}"]`);
    expect(await field("state").textContent()).toContain(
      "an owner holds the key; the effect may be under way",
    );
    expect(await field("tool").textContent()).toBe("send_email");
    expect(await field("owner").textContent()).toMatch(/\S/);
    const before = await field("lease").textContent();
    expect(before).toMatch(/^\d+m(\d+s)? left$/);
    await expect.poll(() => field("lease").textContent(), { timeout: 5_000 }).not.toBe(before);

    await page.goto(`${url}/records/${keys.traced}`);
    expect(await field("error").textContent()).toBe("TimeoutError: no answer from the provider within 30s");
    expect(await field("state").textContent()).toContain(
      "the next attempt reconciles, or an operator resolves it",
    );
    expect(await page.locator("a.trace").getAttribute("href")).toBe(
      `${JAEGER}/trace/4bf92f3577b34da6a3ce929d0e0e4736`,
    );
    // Not logged in: no form, the way to log in and the command line instead.
    expect(await page.locator('form[action$="/resolve"]').count()).toBe(0);
    expect(await page.locator("section.resolve").textContent()).toContain(
      `once resolve ${keys.traced} --applied`,
    );
    await shot(page, "console-record");
    await page.close();
  });

  it("resolves an unknown record as applied, and the next call replays that result without running", async () => {
    const page = await open(operator, `/login?next=${encodeURIComponent(`/records/${keys.unknown}`)}`);
    await page.locator('input[name="token"]').fill(TOKEN);
    await page.locator('form.login button[type="submit"]').click();
    await page.waitForURL(`${url}/records/${keys.unknown}`);
    expect(await page.locator("header .mode").first().textContent()).toBe("writes allowed");
    expect(await page.content()).not.toContain(TOKEN);

    const form = page.locator('form[action$="/resolve"]');
    await form.locator('textarea[name="result"]').fill('{"chargeId": "ch_found_1042"}');
    await form.locator('input[name="by"]').fill("alice");
    await form.locator('textarea[name="why"]').fill("the charge is in the provider's dashboard, 12:03");
    await shot(page, "console-record-unknown");
    await form.locator('button[type="submit"]').click();
    await page.waitForURL(`${url}/records/${keys.unknown}?resolved=applied`);
    expect(await page.locator("p.flash-ok").textContent()).toContain("Resolved as applied");
    expect(await page.locator('td[data-field="state"] .state').textContent()).toBe("done");
    expect(await page.locator('td[data-field="resolution"]').textContent()).toContain("applied by alice, ");
    expect(await page.locator('td[data-field="result"]').textContent()).toContain(
      '"chargeId": "ch_found_1042"',
    );
    await shot(page, "console-record-resolved");

    const record = await store.get(keys.unknown);
    expect(record).toMatchObject({
      state: "done",
      fence: 2,
      result: '{"chargeId":"ch_found_1042"}',
      resolution: { as: "applied", by: "alice", why: "the charge is in the provider's dashboard, 12:03" },
    });
    expect(record?.ttlMs).toBeGreaterThan(23 * 60 * 60 * 1000);

    const runsBefore = runs;
    const next = await inProcess.call(
      chargeCard,
      { orderId: "order-1042", amount: 1200 },
      { taskId: "order-1042", stepId: "charge" },
    );
    expect(next).toMatchObject({ replayed: true, result: { chargeId: "ch_found_1042" }, key: keys.unknown });
    expect(runs).toBe(runsBefore);
    await page.close();
  });

  it("refuses to resolve a record that is done, and leaves it as it is", async () => {
    // Two tabs show the same unknown record; the first resolves it, the second one's form is then stale.
    const first = await open(operator, `/records/${keys.later}`);
    const second = await open(operator, `/records/${keys.later}`);
    for (const [page, as] of [
      [first, "applied"],
      [second, "not_applied"],
    ] as const) {
      const form = page.locator('form[action$="/resolve"]');
      await form.locator(`input[name="as"][value="${as}"]`).check();
      if (as === "applied") await form.locator('textarea[name="result"]').fill('{"chargeId":"ch_1043"}');
      await form.locator('input[name="by"]').fill("bob");
      await form.locator('textarea[name="why"]').fill(`seen as ${as}`);
    }
    await first.locator('form[action$="/resolve"] button[type="submit"]').click();
    await first.waitForURL(/resolved=applied$/);
    const answer = second.waitForResponse((r) => r.request().method() === "POST");
    await second.locator('form[action$="/resolve"] button[type="submit"]').click();
    expect((await answer).status()).toBe(409);
    expect(await second.locator("p.flash-refused").textContent()).toBe(
      "Refused: the record is done, not unknown; only an unknown record can be resolved. Nothing changed.",
    );
    // The refused page has no form for a done record to send again.
    expect(await second.locator('form[action$="/resolve"]').count()).toBe(0);
    expect(await store.get(keys.later)).toMatchObject({
      state: "done",
      result: '{"chargeId":"ch_1043"}',
      resolution: { as: "applied", by: "bob", why: "seen as applied" },
    });
    await first.close();
    await second.close();
  });

  it("shows a stored result, error and tool name holding markup as text, and runs none of it", async () => {
    const attack = `</pre><script>window.__xss = "result"</script><img src=x onerror="window.__xss = 'img'">`;
    const tool = `<img src=x onerror="window.__xss = 'tool'">`;
    const key = await seedDone(store, { tool }, { note: attack });
    const failedKey = await seedFailed(store, { tool }, { name: "<b>Error</b>", message: attack });
    for (const pathname of [
      `/records/${key}`,
      `/records/${failedKey}`,
      `/records?tool=${encodeURIComponent(tool)}`,
      "/",
    ]) {
      const page = await open(stranger, pathname);
      // Two refreshes of the live part, which go through innerHTML.
      await page.waitForTimeout(1_200);
      expect(await page.evaluate(() => (globalThis as { __xss?: string }).__xss)).toBeUndefined();
      expect(await page.locator("main img, main script").count(), pathname).toBe(0);
      expect(await page.locator("main").textContent()).toContain(tool);
      if (pathname === `/records/${key}`)
        expect(await page.locator('td[data-field="result"]').textContent()).toContain(
          `<script>window.__xss = \\"result\\"</script>`,
        );
      if (pathname === `/records/${failedKey}`)
        expect(await page.locator('td[data-field="error"]').textContent()).toBe(`<b>Error</b>: ${attack}`);
      await page.close();
    }
  });

  it("answers to the loopback names it listens on and to no other: a page rebound to 127.0.0.1 reads nothing", async () => {
    const port = new URL(url).port;
    // Under each loopback name, the record, refreshed by its script (same-origin fetches) without a problem.
    for (const origin of [url, `http://localhost:${port}`]) {
      const page = await stranger.newPage();
      const response = await page.goto(`${origin}/records/${keys.traced}`);
      expect(response?.status(), origin).toBe(200);
      expect(await page.locator('td[data-field="tool"]').textContent()).toBe("create_refund");
      await page.waitForTimeout(1_200);
      expect(await page.locator("#status").textContent()).toBe("");
      await page.close();
    }

    // A rebinding attacker's name, resolved to this machine as its DNS would: Chromium sends its own Host.
    const rebound = await browser.context({ resolve: { "evil.example": "127.0.0.1" } });
    const page = await rebound.newPage();
    const response = await page.goto(`http://evil.example:${port}/records/${keys.traced}`);
    expect(response?.status()).toBe(421);
    const text = (await page.locator("body").textContent()) ?? "";
    expect(text).toContain(`does not answer to the host "evil.example:${port}" (Host)`);
    expect(text).toContain(`--allowed-hosts evil.example:${port}`);
    expect(text).not.toContain("create_refund");
    // The page's own script reads same-origin, as a rebound page would: refused as well.
    const read = await page.evaluate(async () => {
      const answer = await fetch("/records?state=unknown");
      return { status: answer.status, text: await answer.text() };
    });
    expect(read.status).toBe(421);
    expect(read.text).not.toContain("charge_card");
    await page.close();

    // Where the test sets Host itself: refused, and so is a forwarded name, which never stands in for Host.
    const raw = (headers: Record<string, string>) => rawRequest(url, `/records/${keys.traced}`, headers);
    expect((await raw({ host: "evil.example" })).status).toBe(421);
    expect((await raw({ host: `127.0.0.1:${port}`, "x-forwarded-host": "evil.example" })).status).toBe(421);
    // Another port is another host.
    expect((await raw({ host: "127.0.0.1:1" })).status).toBe(421);
    expect((await raw({ host: `localhost:${port}` })).status).toBe(200);
    // The operator is told which names those are.
    expect(consoleChild.stderr()).toContain(
      `It answers to the hosts localhost:${port}, 127.0.0.1:${port}, [::1]:${port} (more with --allowed-hosts).`,
    );
  });

  it("answers to a name --allowed-hosts lists, as under a proxy's or a DNS name", async () => {
    const { child, url: listed } = await startConsole(["--allowed-hosts", "ops.example"]);
    try {
      const port = new URL(listed).port;
      expect(child.stderr()).toContain(
        `It answers to the hosts localhost:${port}, 127.0.0.1:${port}, [::1]:${port}, ops.example (more with --allowed-hosts).`,
      );
      const context = await browser.context({
        resolve: { "ops.example": "127.0.0.1", "evil.example": "127.0.0.1" },
      });
      const page = await context.newPage();
      const response = await page.goto(`http://ops.example:${port}/records/${keys.traced}`);
      expect(response?.status()).toBe(200);
      expect(await page.locator('td[data-field="tool"]').textContent()).toBe("create_refund");
      await page.waitForTimeout(1_200);
      expect(await page.locator("#status").textContent()).toBe("");
      expect((await page.goto(`http://evil.example:${port}/`))?.status()).toBe(421);
      await page.close();
      expect((await rawRequest(listed, "/", { host: "evil.example" })).status).toBe(421);
    } finally {
      await child.stop();
    }
  });

  it("refuses a write without the token, one without the CSRF token, and any write on a read-only console", async () => {
    const post = (page: Page, target: string, fields: Record<string, string>) =>
      page.evaluate(
        async ({ target, fields }) => {
          const response = await fetch(target, {
            method: "POST",
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams(fields).toString(),
          });
          return { status: response.status, text: await response.text() };
        },
        { target, fields },
      );
    const before = await store.get(keys.traced);
    const fields = { as: "not_applied", by: "mallory", why: "no reason", fence: String(before?.fence) };

    // Not logged in: the CSRF token is right (from this browser's own login form), the console's token missing.
    const page = await open(stranger, "/login");
    const csrf = (await page.locator('input[name="csrf"]').getAttribute("value")) ?? "";
    const noToken = await post(page, `${url}/records/${keys.traced}/resolve`, { ...fields, csrf });
    expect(noToken.status).toBe(401);
    expect(noToken.text).toContain("Resolving needs the console&#39;s token: log in first. Nothing changed.");
    // A wrong token does not log in.
    await page.locator('input[name="token"]').fill(`${TOKEN.slice(0, -1)}x`);
    await page.locator('form.login button[type="submit"]').click();
    expect(await page.locator("p.flash-refused").textContent()).toBe("That is not the console's token.");

    // Logged in, but the form's CSRF token is missing or another browser's.
    const loggedIn = await open(operator, `/records/${keys.traced}`);
    for (const forged of [{}, { csrf }] as Record<string, string>[]) {
      const refused = await post(loggedIn, `${url}/records/${keys.traced}/resolve`, { ...fields, ...forged });
      expect(refused.status).toBe(403);
      expect(refused.text).toContain("The write did not come from this console&#39;s own page");
    }

    // A console started read-only refuses every write, whoever sends it.
    const readOnly = http.createServer(
      toNodeListener(createConsole({ store: new RedisOperatorStore({ redis, prefix: PREFIX }) })),
    );
    await new Promise<void>((resolve) => readOnly.listen(0, "127.0.0.1", resolve));
    const readOnlyUrl = `http://127.0.0.1:${(readOnly.address() as AddressInfo).port}`;
    try {
      const ro = await operator.newPage();
      await ro.goto(`${readOnlyUrl}/records/${keys.traced}`);
      expect(await ro.locator("header .mode").textContent()).toBe("read-only");
      expect(await ro.locator('form[action$="/resolve"]').count()).toBe(0);
      const refused = await post(ro, `${readOnlyUrl}/records/${keys.traced}/resolve`, { ...fields, csrf });
      expect(refused.status).toBe(403);
      expect(refused.text).toContain("This console is read-only");
      await ro.close();
    } finally {
      readOnly.closeAllConnections();
      await new Promise<void>((resolve) => readOnly.close(() => resolve()));
    }

    expect(await store.get(keys.traced)).toEqual({ ...before, ttlMs: expect.any(Number) });
    await page.close();
    await loggedIn.close();
  });

  it("lists the calls waiting for approval, approves one from the list and denies one on its page", async () => {
    const trace = randomTraceparent();
    const first = await seedAwaitingApproval(store, {
      tool: "refund_order",
      reason: "refund of 240 EUR, over the 100 EUR limit",
      trace,
    });
    const page = await open(operator, "/approvals");
    const rows = page.locator("table.approvals tbody tr");
    await expect.poll(() => rows.count()).toBe(1);
    // A request made while the page is open appears without a reload.
    const second = await seedAwaitingApproval(store, { tool: "refund_order", reason: "refund of 130 EUR" });
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(2);

    const row = page.locator(`tr[data-key="${first}"]`);
    expect(await row.locator("td.reason").textContent()).toBe("refund of 240 EUR, over the 100 EUR limit");
    expect(await row.locator("a.trace").getAttribute("href")).toBe(`${JAEGER}/trace/${trace.slice(3, 35)}`);
    expect(await row.locator("code.fingerprint").getAttribute("title")).toBe(`fp-${first.slice(0, 16)}`);
    expect(await row.textContent()).toMatch(/expires in \d+m/);
    // While a form is being filled in, the refresh leaves the list alone (a third request waits for a reload).
    await row.locator('input[name="by"]').fill("alice");
    await row.locator('input[name="why"]').fill("the customer confirmed by phone");
    const third = await seedAwaitingApproval(store, { tool: "refund_order", reason: "refund of 101 EUR" });
    await page.waitForTimeout(1_500);
    expect(await rows.count()).toBe(2);
    expect(await row.locator('input[name="why"]').inputValue()).toBe("the customer confirmed by phone");
    await shot(page, "console-approvals");

    await row.locator('button[value="approve"]').click();
    await page.waitForURL(`${url}/approvals?decided=approved&key=${first}`);
    expect(await page.locator("p.flash-ok").textContent()).toContain(`Approved ${first.slice(0, 12)}…`);
    expect(await page.locator(`tr[data-key="${first}"]`).count()).toBe(0);
    expect(await rows.count()).toBe(2);
    expect(await store.get(first)).toMatchObject({
      state: "approved",
      approval: { decision: { as: "approved", by: "alice", why: "the customer confirmed by phone" } },
    });

    // On the record's own page: the request in full, and the same form.
    await page.locator(`tr[data-key="${second}"] td.key a`).click();
    await page.waitForURL(`${url}/records/${second}`);
    expect(await page.locator('td[data-field="approval"]').textContent()).toContain("refund of 130 EUR");
    const form = page.locator('section.decide form[action$="/decide"]');
    await form.locator('input[name="by"]').fill("bob");
    await form.locator('input[name="why"]').fill("over the limit without a ticket");
    await form.locator('button[value="deny"]').click();
    await page.waitForURL(`${url}/records/${second}?decided=denied&key=${second}`);
    expect(await page.locator('td[data-field="state"] .state').textContent()).toBe("failed");
    expect(await page.locator('td[data-field="decision"]').textContent()).toContain("denied by bob");
    expect(await page.locator("section.decide").count()).toBe(0);

    // Not logged in: the list, no form, and the way to log in or the command line instead.
    const strangerPage = await open(stranger, "/approvals");
    const strangerRow = strangerPage.locator(`tr[data-key="${third}"]`);
    await expect.poll(() => strangerRow.count()).toBe(1);
    expect(await strangerPage.locator('form[action$="/decide"]').count()).toBe(0);
    expect(await strangerRow.textContent()).toContain(`once approve ${third} --fingerprint fp-`);
    await strangerPage.close();
    await page.close();
  });

  it("shows a task's calls from a record's page, approves one there, and cancels the task", async () => {
    const trace = randomTraceparent();
    const task = await seedTask(store, { namespace: "checkout", taskId: "order-2077", trace });
    const taskPath = "/tasks/checkout/order-2077";
    const page = await open(operator, `/records/${task.keys.charge}`);
    expect(await page.locator('td[data-field="task"]').textContent()).toBe(
      "task order-2077 (namespace checkout, step charge)",
    );
    await page.locator('td[data-field="task"] a.task').click();
    await page.waitForURL(`${url}${taskPath}`);
    const rows = page.locator("table.task tbody tr");
    await expect.poll(() => rows.count()).toBe(4);
    const cells = async (i: number) =>
      (await rows.nth(i).locator("td").allTextContents()).slice(0, 4).map((text) => text.trim());
    expect(await cells(0)).toEqual(["1", "search", "done", "search_flights"]);
    expect(await cells(1)).toEqual(["2", "refund", "awaiting_approval", "refund_order"]);
    expect(await cells(2)).toEqual(["3", "charge", "claimed", "charge_card"]);
    expect(await cells(3)).toEqual(["4", "email", "released", "send_email"]);
    expect(await rows.nth(0).locator("a.trace").getAttribute("href")).toBe(
      `${JAEGER}/trace/${trace.slice(3, 35)}`,
    );
    expect(await page.locator("p.task-status").textContent()).toBe("Not cancelled.");

    // Approve the refund on the task's page: back on it, the refund approved.
    const refund = rows.nth(1);
    await refund.locator('input[name="by"]').fill("alice");
    await refund.locator('input[name="why"]').fill("within the limit after all");
    await refund.locator('button[value="approve"]').click();
    await page.waitForURL(`${url}${taskPath}?decided=approved&key=${task.keys.refund}`);
    expect(await page.locator("p.flash-ok").textContent()).toContain("Approved");
    expect(await rows.nth(1).locator(".state").textContent()).toBe("approved");
    expect(await rows.nth(1).locator("td.approval").textContent()).toContain("approved by alice");

    // Cancel the task: the approved refund and the released email never run, the charge is told to stop.
    const form = page.locator("section.cancel form.cancel");
    await form.locator('input[name="by"]').fill("bob");
    await form.locator('input[name="why"]').fill("the customer cancelled the order");
    await shot(page, "console-task");
    await form.locator("button.cancel").click();
    await page.waitForURL(`${url}${taskPath}?cancelled=2&running=1`);
    expect(await page.locator("p.flash-ok").textContent()).toContain("Cancelled: 2 calls not started");
    expect(await page.locator("p.task-status").textContent()).toMatch(
      /^cancelled cancelled by bob, \S+Z \(\S+ ago\): “?the customer cancelled the order”?$/,
    );
    expect(
      await rows.evaluateAll((trs) => trs.map((tr) => tr.querySelector(".state")?.textContent ?? "")),
    ).toEqual(["done", "cancelled", "claimed", "cancelled"]);
    expect(await rows.nth(2).locator("td.outcome").textContent()).toBe("told to stop (task cancelled)");
    expect(await page.locator("section.cancel").count()).toBe(0);
    const read = await store.readTask({ namespace: "checkout", taskId: "order-2077" });
    expect(read.cancellation).toMatchObject({ by: "bob", why: "the customer cancelled the order" });
    await shot(page, "console-task-cancelled");

    // The list shows the new state.
    await page.goto(`${url}/records?state=cancelled`);
    const listed = page.locator("table.records tbody tr");
    await expect.poll(() => listed.count()).toBe(2);
    expect(await listed.first().locator(".state").textContent()).toBe("cancelled");
    await page.close();
  });

  it("says plainly when the store is unreachable, and carries on when it is back", async () => {
    const page = await open(operator, "/records?state=unknown");
    const rows = page.locator("table.records tbody tr");
    await expect.poll(() => rows.count()).toBe(1);
    let navigations = 0;
    page.on("framenavigated", () => navigations++);

    await server.kill("SIGTERM");
    const status = page.locator("#status");
    await expect.poll(() => status.textContent(), { timeout: 15_000 }).toContain("The store is unreachable");
    expect(await status.textContent()).toContain(`(${server.url}, prefix "once:")`);
    expect(await page.locator("#live").getAttribute("class")).toContain("stale");
    await shot(page, "console-unreachable");
    // A page opened meanwhile says so too, with a 503.
    const fresh = await operator.newPage();
    const response = await fresh.goto(`${url}/`);
    expect(response?.status()).toBe(503);
    expect(await fresh.locator("#status").textContent()).toContain("The store is unreachable");
    await fresh.close();

    await server.restart();
    await expect.poll(() => status.textContent(), { timeout: 20_000 }).toBe("");
    expect(await rows.count()).toBe(1);
    expect(await page.locator("#live").getAttribute("class")).not.toContain("stale");
    expect(navigations).toBe(0);
    await page.close();
  });
});
