// A task's page over HTTP, on real Redis: every call filed under the task in step order, linked from each call's
// record page; its cancel form goes through OperatorStore.cancel only with the console's token and its own
// page's CSRF token; every refusal says why and changes nothing.

import { randomBytes } from "node:crypto";
import type { OnceRecord } from "@once/core";
import { describe, expect, it } from "vitest";
import { JAEGER, origin, readOnlyOrigin, store, useConsoleWorld } from "./console-world.js";
import { randomTraceparent, type SeededTask, seedTask } from "./seed.js";
import { Session } from "./session.js";

const TOKEN = "k".repeat(32);
useConsoleWorld("console-tasks", TOKEN);

function newTask(trace?: string): Promise<SeededTask> {
  return seedTask(store, {
    namespace: "checkout",
    taskId: `order-${randomBytes(4).toString("hex")}`,
    ...(trace === undefined ? {} : { trace }),
  });
}

const pathOf = (task: SeededTask) => `/tasks/${task.namespace}/${task.taskId}`;

/** Every record of the task as it is, without their time to live (which runs down between two reads). */
async function taskAsIs(task: SeededTask): Promise<unknown> {
  const read = await store.readTask(task);
  return {
    cancellation: read.cancellation,
    records: read.records.map(({ ttlMs: _ttl, ...rest }: OnceRecord) => rest),
  };
}

describe("a task's page", () => {
  it("shows every call in step order: state, tool, outcome, approval with its form, trace, key; linked from each record", async () => {
    const trace = randomTraceparent();
    const task = await newTask(trace);
    const session = new Session(origin);
    await session.logIn(TOKEN);
    const page = await (await session.fetch(pathOf(task))).text();
    const rows = [...page.matchAll(/<tr data-key="([0-9a-f]{64})">([\s\S]*?)<\/tr>/g)];
    expect(rows.map((row) => row[1])).toEqual([
      task.keys.search,
      task.keys.refund,
      task.keys.charge,
      task.keys.email,
    ]);
    const [search, refund, charge, email] = rows.map((row) => row[2] ?? "");
    expect(search).toContain("state-done");
    expect(search).toContain("{&quot;flights&quot;:3}");
    expect(search).toContain(`href="${JAEGER}/trace/${trace.slice(3, 35)}"`);
    expect(refund).toContain("state-awaiting_approval");
    expect(refund).toContain("refund over 100 EUR");
    expect(refund).toContain(`action="/records/${task.keys.refund}/decide"`);
    expect(refund).toContain(`name="back" value="${pathOf(task)}"`);
    expect(charge).toContain("state-claimed");
    expect(email).toContain("state-released");
    expect(page).toContain("Not cancelled.");
    expect(page).toContain(`action="${pathOf(task)}/cancel"`);

    const record = await (await session.fetch(`/records/${task.keys.charge}`)).text();
    expect(record).toContain(`<a class="task" href="${pathOf(task)}">task ${task.taskId}</a>`);
    expect(record).toContain("namespace checkout, step charge");

    // Not logged in: the page, no form, the command line instead.
    const stranger = await (await new Session(origin).fetch(pathOf(task))).text();
    expect(stranger).not.toContain(`action="${pathOf(task)}/cancel"`);
    expect(stranger).toContain(`once cancel --task ${task.taskId} --namespace checkout --why`);
  });

  it("without the console's token, or without this page's CSRF token, refuses the cancel and changes nothing", async () => {
    const task = await newTask();
    const before = await taskAsIs(task);
    const fields = { by: "mallory", why: "no reason" };

    const stranger = new Session(origin);
    await stranger.fetch(pathOf(task));
    const noToken = await stranger.post(`${pathOf(task)}/cancel`, { ...fields, csrf: stranger.csrf });
    expect(noToken.status).toBe(401);
    expect(await noToken.text()).toContain(
      "Cancelling needs the console&#39;s token: log in first. Nothing changed.",
    );

    const operator = new Session(origin);
    await operator.logIn(TOKEN);
    for (const csrf of [undefined, stranger.csrf]) {
      const refused = await operator.post(`${pathOf(task)}/cancel`, {
        ...fields,
        ...(csrf === undefined ? {} : { csrf }),
      });
      expect(refused.status).toBe(403);
      expect(await refused.text()).toContain("The write did not come from this console&#39;s own page");
    }
    const crossSite = await operator.fetch(`${pathOf(task)}/cancel`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: "http://evil.example" },
      body: new URLSearchParams({ ...fields, csrf: operator.csrf }).toString(),
    });
    expect(crossSite.status).toBe(403);

    const reader = new Session(readOnlyOrigin);
    await reader.fetch(pathOf(task));
    const readOnly = await reader.post(`${pathOf(task)}/cancel`, { ...fields, csrf: reader.csrf });
    expect(readOnly.status).toBe(403);
    expect(await readOnly.text()).toContain("This console is read-only");

    const noWhy = await operator.post(`${pathOf(task)}/cancel`, {
      by: "alice",
      why: " ",
      csrf: operator.csrf,
    });
    expect(noWhy.status).toBe(400);
    expect(await noWhy.text()).toContain("Not cancelled: Say why: it is kept with the task.");

    expect(await taskAsIs(task)).toEqual(before);
  });

  it("cancels through the store once: what had not started is cancelled, the running call told; a second cancel is refused", async () => {
    const task = await newTask();
    const session = new Session(origin);
    await session.logIn(TOKEN);
    const answer = await session.post(`${pathOf(task)}/cancel`, {
      by: "alice",
      why: "the customer cancelled the order",
      csrf: session.csrf,
    });
    expect(answer.status).toBe(303);
    expect(answer.headers.get("location")).toBe(`${pathOf(task)}?cancelled=2&running=1`);
    const cancellation = { by: "alice", why: "the customer cancelled the order", at: expect.any(Number) };
    const read = await store.readTask(task);
    expect(read.cancellation).toEqual(cancellation);
    expect(read.records.map((r) => r.state)).toEqual(["done", "cancelled", "claimed", "cancelled"]);

    const page = await (await session.fetch(`${pathOf(task)}?cancelled=2&running=1`)).text();
    expect(page).toContain(
      "Cancelled: 2 calls not started (now cancelled, never run), 1 whose effect may be under way",
    );
    expect(page).toContain("cancelled by <strong>alice</strong>");
    expect(page).toContain("told to stop (task cancelled)");
    // No cancel form for a cancelled task, and no decide form for its cancelled refund.
    expect(page).not.toContain(`action="${pathOf(task)}/cancel"`);
    expect(page).not.toContain("/decide");

    // The list shows the new state, filtered by it.
    const list = await (await session.fetch(`/records?state=cancelled&tool=refund_order`)).text();
    expect(list).toContain(`/records/${task.keys.refund}`);
    expect(list).toContain('<span class="state state-cancelled">cancelled</span>');

    const after = await taskAsIs(task);
    const again = await session.post(`${pathOf(task)}/cancel`, {
      by: "bob",
      why: "twice",
      csrf: session.csrf,
    });
    expect(again.status).toBe(409);
    expect(await again.text()).toMatch(
      /Refused: the task was already cancelled by alice at \S+Z \(the customer cancelled the order\)\. Nothing changed\./,
    );
    expect(await taskAsIs(task)).toEqual(after);
  });

  it("approves a call from the task's page and comes back to it", async () => {
    const task = await newTask();
    const session = new Session(origin);
    await session.logIn(TOKEN);
    const refund = (await store.get(task.keys.refund)) as OnceRecord;
    const answer = await session.post(`/records/${task.keys.refund}/decide`, {
      csrf: session.csrf,
      fence: String(refund.fence),
      fingerprint: refund.fingerprint,
      back: pathOf(task),
      decision: "approve",
      by: "alice",
      why: "within the limit after all",
    });
    expect(answer.status).toBe(303);
    expect(answer.headers.get("location")).toBe(`${pathOf(task)}?decided=approved&key=${task.keys.refund}`);
    expect((await store.get(task.keys.refund))?.state).toBe("approved");
  });

  it("answers 404 for a path that names no task, and a page for a task nothing is known of", async () => {
    const session = new Session(origin);
    expect((await session.fetch("/tasks/checkout/a%07b")).status).toBe(404);
    const unknown = await session.fetch(`/tasks/checkout/never-${randomBytes(4).toString("hex")}`);
    expect(unknown.status).toBe(200);
    expect(await unknown.text()).toContain("No call is filed under this task");
  });
});
