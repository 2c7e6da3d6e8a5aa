// The "waiting for approval" page and its approve / deny forms over HTTP, on real Redis: a decision goes through
// the store's fenced, fingerprint-bound write only with the console's token and its own page's CSRF token;
// every refusal says why and leaves the record as it was.

import type { OnceRecord } from "@once/core";
import { describe, expect, it } from "vitest";
import { JAEGER, origin, readOnlyOrigin, store, useConsoleWorld } from "./console-world.js";
import { randomTraceparent, seedAwaitingApproval, seedDone } from "./seed.js";
import { Session } from "./session.js";

const TOKEN = "t".repeat(32);
useConsoleWorld("console-approvals", TOKEN);

/** The record as it is, without its time to live (which runs down between two reads). */
async function unchanged(key: string): Promise<Omit<OnceRecord, "ttlMs">> {
  const { ttlMs: _ttl, ...rest } = (await store.get(key)) ?? ({} as OnceRecord);
  return rest;
}

function decideFields(record: OnceRecord, fields: Record<string, string>): Record<string, string> {
  return {
    fence: String(record.fence),
    fingerprint: record.fingerprint,
    back: "/approvals",
    decision: "approve",
    by: "alice",
    why: "the customer confirmed by phone",
    ...fields,
  };
}

describe("the waiting-for-approval page", () => {
  it("lists each pending request: tool, reason, requested and expires, fingerprint, trace, and a form to decide", async () => {
    const trace = randomTraceparent();
    const key = await seedAwaitingApproval(store, {
      tool: "refund_order",
      reason: "refund over 100 EUR",
      trace,
    });
    const other = await seedDone(store, { tool: "send_email" }, { messageId: "m1" });
    const session = new Session(origin);
    await session.logIn(TOKEN);
    const page = await (await session.fetch("/approvals")).text();
    const row = new RegExp(`<tr data-key="${key}">([\\s\\S]*?)</tr>`).exec(page)?.[1] ?? "";
    expect(row).toContain("refund_order");
    expect(row).toContain("refund over 100 EUR");
    expect(row).toMatch(/expires in (9m\d*s?|10m)/);
    expect(row).toContain(`title="fp-${key.slice(0, 16)}"`);
    expect(row).toContain(`href="${JAEGER}/trace/${trace.slice(3, 35)}"`);
    expect(row).toContain(`action="/records/${key}/decide"`);
    expect(row).toContain(`name="fingerprint" value="fp-${key.slice(0, 16)}"`);
    expect(page).not.toContain(other);
    // The live part alone, as the page's script asks for it, has the same row.
    const live = await (await session.fetch("/approvals?live=1")).text();
    expect(live).toContain(`<tr data-key="${key}">`);
    expect(live).not.toContain("<header>");
    // The record's own page shows the request and the same form.
    const recordPage = await (await session.fetch(`/records/${key}`)).text();
    expect(recordPage).toContain("refund over 100 EUR");
    expect(recordPage).toContain(`action="/records/${key}/decide"`);
  });

  it("without the console's token, or without this page's CSRF token, refuses the decision and changes nothing", async () => {
    const key = await seedAwaitingApproval(store, { tool: "refund_order", reason: "refund over 100 EUR" });
    const record = (await store.get(key)) as OnceRecord;
    const before = await unchanged(key);

    // Not logged in, with a good CSRF token from this browser's own page.
    const stranger = new Session(origin);
    const list = await (await stranger.fetch("/approvals")).text();
    expect(list).not.toContain(`action="/records/${key}/decide"`);
    expect(list).toContain(`once approve ${key} --fingerprint fp-`);
    const noToken = await stranger.post(
      `/records/${key}/decide`,
      decideFields(record, { csrf: stranger.csrf }),
    );
    expect(noToken.status).toBe(401);
    expect(await noToken.text()).toContain(
      "Deciding needs the console&#39;s token: log in first. Nothing changed.",
    );

    // Logged in, but the CSRF token is missing, another browser's, or the post comes from another site.
    const operator = new Session(origin);
    await operator.logIn(TOKEN);
    for (const [csrf, headers] of [
      [undefined, {}],
      [stranger.csrf, {}],
      [operator.csrf, { "sec-fetch-site": "cross-site" }],
    ] as const) {
      const refused = await operator.fetch(`/records/${key}/decide`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
        body: new URLSearchParams(decideFields(record, csrf === undefined ? {} : { csrf })).toString(),
      });
      expect(refused.status).toBe(403);
      expect(await refused.text()).toContain("The write did not come from this console&#39;s own page");
    }

    // The token as a bearer header is a login, but not a CSRF token.
    const bearer = await fetch(`${origin}/records/${key}/decide`, {
      method: "POST",
      redirect: "manual",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(decideFields(record, {})).toString(),
    });
    expect(bearer.status).toBe(403);

    // A read-only console refuses it whoever sends it.
    const reader = new Session(readOnlyOrigin);
    await reader.fetch("/approvals");
    const readOnly = await reader.post(`/records/${key}/decide`, decideFields(record, { csrf: reader.csrf }));
    expect(readOnly.status).toBe(403);
    expect(await readOnly.text()).toContain("This console is read-only");

    expect(await unchanged(key)).toEqual(before);
    expect(before.state).toBe("awaiting_approval");
  });

  it("approves through the store, fenced and bound to the fingerprint; who and why are kept", async () => {
    const key = await seedAwaitingApproval(store, { tool: "refund_order", reason: "refund over 100 EUR" });
    const record = (await store.get(key)) as OnceRecord;
    const session = new Session(origin);
    await session.logIn(TOKEN);
    const answer = await session.post(`/records/${key}/decide`, decideFields(record, { csrf: session.csrf }));
    expect(answer.status).toBe(303);
    expect(answer.headers.get("location")).toBe(`/approvals?decided=approved&key=${key}`);
    expect(await store.get(key)).toMatchObject({
      state: "approved",
      fence: record.fence + 1,
      approval: { decision: { as: "approved", by: "alice", why: "the customer confirmed by phone" } },
    });
    const page = await (await session.fetch(`/approvals?decided=approved&key=${key}`)).text();
    expect(page).toContain(
      `Approved ${key.slice(0, 12)}…: the next attempt of the call runs the effect, once.`,
    );
    expect(page).not.toContain(`<tr data-key="${key}">`);
  });

  it("denies: the call fails for good with the denial", async () => {
    const key = await seedAwaitingApproval(store, { tool: "refund_order", reason: "refund over 100 EUR" });
    const record = (await store.get(key)) as OnceRecord;
    const session = new Session(origin);
    await session.logIn(TOKEN);
    const answer = await session.post(
      `/records/${key}/decide`,
      decideFields(record, {
        csrf: session.csrf,
        decision: "deny",
        back: `/records/${key}`,
        why: "over the limit",
      }),
    );
    expect(answer.status).toBe(303);
    expect(answer.headers.get("location")).toBe(`/records/${key}?decided=denied&key=${key}`);
    expect(await store.get(key)).toMatchObject({
      state: "failed",
      error: { code: "denied" },
      approval: { decision: { as: "denied", by: "alice", why: "over the limit" } },
    });
  });

  it("shows the store's refusal plainly, nothing changed: decided meanwhile, another fence, another fingerprint", async () => {
    const key = await seedAwaitingApproval(store, { tool: "refund_order", reason: "refund over 100 EUR" });
    const record = (await store.get(key)) as OnceRecord;
    const session = new Session(origin);
    await session.logIn(TOKEN);
    const before = await unchanged(key);

    const staleFence = await session.post(
      `/records/${key}/decide`,
      decideFields(record, { csrf: session.csrf, fence: String(record.fence - 1) }),
    );
    expect(staleFence.status).toBe(409);
    expect(await staleFence.text()).toContain(
      `Refused: the record moved on (fence ${record.fence}, ${record.fence - 1} seen). Nothing changed.`,
    );
    const otherCall = await session.post(
      `/records/${key}/decide`,
      decideFields(record, { csrf: session.csrf, fingerprint: "fp-another-call" }),
    );
    expect(otherCall.status).toBe(409);
    expect(await otherCall.text()).toContain("the fingerprint fp-another-call is not the record&#39;s");
    const noWhy = await session.post(
      `/records/${key}/decide`,
      decideFields(record, { csrf: session.csrf, why: " " }),
    );
    expect(noWhy.status).toBe(400);
    expect(await noWhy.text()).toContain("Not decided: Say why: it is kept on the record.");
    expect(await unchanged(key)).toEqual(before);

    // Two people on the same request: the first decides, the second one's form is then stale.
    const first = await session.post(`/records/${key}/decide`, decideFields(record, { csrf: session.csrf }));
    expect(first.status).toBe(303);
    const afterFirst = await unchanged(key);
    const second = await session.post(
      `/records/${key}/decide`,
      decideFields(record, { csrf: session.csrf, decision: "deny", by: "bob" }),
    );
    expect(second.status).toBe(409);
    const text = await second.text();
    expect(text).toContain("already approved by alice");
    expect(text).toContain("Nothing changed.");
    // The refused page has no form for a decided record to send again.
    expect(text).not.toContain(`action="/records/${key}/decide"`);
    expect(await unchanged(key)).toEqual(afterFirst);
  });
});
