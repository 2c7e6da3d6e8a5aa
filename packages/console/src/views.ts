import {
  type ApprovalDecision,
  type Cancellation,
  type OnceRecord,
  RECORD_STATES,
  type RecordCounts,
  type RecordPage,
  type RecordState,
  type TaskIdentity,
  type TaskRecords,
} from "@once/core";
import {
  ago,
  errorText,
  formatDuration,
  leaseRemaining,
  leaseText,
  stateMeaning,
  traceIdOf,
} from "@once/core/internal";
import { type Html, html } from "./html.js";

// Every page of the console, rendered on the server. Nothing read from a record or a request is written
// into a page except through `html`, which escapes it.

/** What every page needs to know about the console and the person looking at it. */
export interface PageContext {
  /** Where the console is mounted: "" or "/once". */
  base: string;
  storeLabel: string;
  refreshMs: number;
  jaegerUrl: string | undefined;
  /** Options of `once resolve` to reach this store, e.g. `--prefix checkout:`. */
  commandOptions: string | undefined;
  /** The value for the forms' hidden `csrf` field. */
  csrf: string;
  writes: WriteAccess;
}

/** Whether this person may resolve, and if not, why not. */
export type WriteAccess =
  | { can: true; user?: string; loggedInWithToken: boolean }
  | { can: false; why: "read-only" | "login" | "forbidden" };

export interface ListQuery {
  states: RecordState[];
  tools: string[];
  /** The age filter as typed, e.g. `10m`. */
  olderThan?: string;
  olderThanMs?: number;
  cursor?: string;
}

export interface ResolveForm {
  as?: string;
  result?: string;
  error?: string;
  code?: string;
  by?: string;
  why?: string;
}

/** What a person typed into an approve / deny form, kept when the page comes back with a problem. */
export interface DecideForm {
  by: string;
  why: string;
}

export function layout(ctx: PageContext, page: { title: string; body: Html; banner?: Html }): Html {
  const { base } = ctx;
  const mode =
    ctx.writes.can === true
      ? html`<span class="mode mode-write">writes allowed${ctx.writes.user === undefined ? "" : html` · ${ctx.writes.user}`}</span>${
          ctx.writes.loggedInWithToken
            ? html`<form method="post" action="${base}/logout" class="inline"><input type="hidden" name="csrf" value="${ctx.csrf}"><button type="submit" class="link">log out</button></form>`
            : ""
        }`
      : ctx.writes.why === "login"
        ? html`<a class="mode" href="${base}/login">log in to resolve</a>`
        : html`<span class="mode">read-only</span>`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${page.title} · once console</title>
<link rel="stylesheet" href="${base}/assets/console.css">
<script src="${base}/assets/console.js" defer></script>
</head>
<body data-refresh-ms="${ctx.refreshMs}">
<header>
<a class="brand" href="${base}/">once</a>
<nav><a href="${base}/">Overview</a><a href="${base}/records">Records</a><a href="${base}/records?state=unknown">Unknown</a><a href="${base}/records?state=claimed&amp;state=reconciling">In flight</a><a href="${base}/approvals">Waiting for approval</a></nav>
<span class="store" title="the store">${ctx.storeLabel}</span>
${mode}
</header>
<div id="status" role="status" aria-live="polite">${page.banner ?? ""}</div>
<main>
${page.body}
</main>
</body>
</html>
`;
}

/** Said plainly at the top of the page while the store does not answer. */
export function unreachableBanner(ctx: PageContext, reason: string, stale: boolean): Html {
  return html`<div class="banner banner-down"><strong>The store is unreachable</strong> (${ctx.storeLabel}): ${reason}. ${
    stale ? "What is shown below is from the last time it answered. " : ""
  }This page tries again every ${formatDuration(ctx.refreshMs)}.</div>`;
}

// --- overview ----------------------------------------------------------------------------------------------

export function overviewBody(ctx: PageContext, live: Html): Html {
  return html`<h1>Records by state and tool</h1>
<div id="live" data-live="${ctx.base}/?live=1">${live}</div>`;
}

export function overviewLive(ctx: PageContext, counts: RecordCounts): Html {
  const { base } = ctx;
  const read = counts.records;
  const scope = counts.sampled
    ? html`<p class="note">Counted a sample: the first ${read} records SCAN found of ~${counts.totalKeys ?? "?"} keys in the database (every key, not only once's).</p>`
    : html`<p class="note">Every record read: ${read} record${read === 1 ? "" : "s"}.</p>`;
  const cards = RECORD_STATES.map(
    (state) =>
      html`<a class="card card-${state}${state === "unknown" && counts.byState.unknown > 0 ? " attention" : ""}" href="${base}/records?state=${state}"><span class="count">${counts.byState[state]}</span><span class="label">${state}</span></a>`,
  );
  const tools = Object.entries(counts.byTool);
  const attention: Html[] = [];
  if (counts.byState.unknown > 0 && counts.oldestUnknownAt !== undefined) {
    attention.push(
      html`<li><a href="${base}/records?state=unknown">${counts.byState.unknown} unknown</a>, the oldest unchanged for ${formatDuration(counts.now - counts.oldestUnknownAt)}: each waits for its next attempt's reconcile or for an operator.</li>`,
    );
  }
  if (counts.expiredLeases > 0) {
    attention.push(
      html`<li>${counts.expiredLeases} claimed or reconciling with an expired lease: their owners stopped; the next attempt takes over or reconciles.</li>`,
    );
  }
  if (counts.skipped > 0) {
    attention.push(
      html`<li>${counts.skipped} key${counts.skipped === 1 ? " is" : "s are"} under the prefix but not a once record (skipped).</li>`,
    );
  }
  return html`${scope}
<div class="cards">${cards}</div>
${attention.length > 0 ? html`<ul class="attention">${attention}</ul>` : ""}
<h2>By tool</h2>
${
  tools.length === 0
    ? html`<p class="empty">No records.</p>`
    : html`<table class="counts">
<thead><tr><th>tool</th><th class="num">total</th>${RECORD_STATES.map((s) => html`<th class="num">${s}</th>`)}</tr></thead>
<tbody>${tools.map(
        ([tool, byState]) =>
          html`<tr><td><a href="${base}/records?tool=${encodeURIComponent(tool)}">${tool}</a></td><td class="num">${RECORD_STATES.reduce((sum, s) => sum + byState[s], 0)}</td>${RECORD_STATES.map(
            (s) =>
              html`<td class="num">${byState[s] === 0 ? html`<span class="zero">0</span>` : html`<a href="${base}/records?tool=${encodeURIComponent(tool)}&amp;state=${s}">${byState[s]}</a>`}</td>`,
          )}</tr>`,
      )}</tbody>
</table>`
}`;
}

// --- the list ----------------------------------------------------------------------------------------------

/** The list's query string for `query`, with `cursor` if given (a leading `?`, or "" when empty). */
export function listSearch(query: ListQuery, cursor?: string): string {
  const params = new URLSearchParams();
  for (const state of query.states) params.append("state", state);
  for (const tool of query.tools) params.append("tool", tool);
  if (query.olderThan !== undefined) params.set("older", query.olderThan);
  if (cursor !== undefined) params.set("cursor", cursor);
  const text = params.toString();
  return text === "" ? "" : `?${text}`;
}

export function listBody(ctx: PageContext, query: ListQuery, live: Html, problem?: string): Html {
  const { base } = ctx;
  const liveSearch = listSearch(query, query.cursor);
  return html`<h1>Records</h1>
<form class="filters" method="get" action="${base}/records">
<fieldset><legend>state</legend>${RECORD_STATES.map(
    (state) =>
      html`<label><input type="checkbox" name="state" value="${state}"${query.states.includes(state) ? html` checked` : ""}> ${state}</label>`,
  )}</fieldset>
<label>tool <input type="text" name="tool" value="${query.tools.join(", ")}" placeholder="any (comma-separated)"></label>
<label>unchanged for at least <input type="text" name="older" value="${query.olderThan ?? ""}" placeholder="e.g. 10m" size="6"></label>
<button type="submit">Filter</button>
</form>
${problem === undefined ? "" : html`<p class="problem">${problem}</p>`}
<div id="live" data-live="${base}/records${liveSearch}${liveSearch === "" ? "?" : "&"}live=1">${live}</div>`;
}

export function listLive(ctx: PageContext, query: ListQuery, page: RecordPage): Html {
  const { base } = ctx;
  const records = [...page.records].sort((a, b) => a.updatedAt - b.updatedAt);
  const rows = records.map(
    (r) => html`<tr>
<td class="key"><a href="${base}/records/${r.key}" title="${r.key}">${r.key.slice(0, 12)}…</a></td>
<td>${stateBadge(r.state)}</td>
<td>${r.tool}</td>
<td>${r.phase}</td>
<td class="num">${r.fence}</td>
<td title="${new Date(r.updatedAt).toISOString()}">${ago(r.updatedAt, page.now)}</td>
<td>${lease(r, page.now)}</td>
<td class="num">${r.claims}</td>
</tr>`,
  );
  const where = describeQuery(query);
  const more = page.cursor === undefined ? undefined : `${base}/records${listSearch(query, page.cursor)}`;
  return html`${
    records.length === 0
      ? html`<p class="empty">No records${where} on this page.</p>`
      : html`<table class="records">
<thead><tr><th>key</th><th>state</th><th>tool</th><th>phase</th><th class="num">fence</th><th>updated</th><th>lease</th><th class="num">claims</th></tr></thead>
<tbody>${rows}</tbody>
</table>`
  }
<p class="note">${records.length} record${records.length === 1 ? "" : "s"}${where}, oldest first, from ${page.examined} key${page.examined === 1 ? "" : "s"} looked at with SCAN${
    query.cursor === undefined ? "" : " after the previous page"
  }${page.cursor === undefined ? "; no more keys to look at." : "; there are more keys."}${
    page.skipped > 0
      ? ` ${page.skipped} key${page.skipped === 1 ? " was" : "s were"} not once records (skipped).`
      : ""
  }</p>
<p class="pages">${query.cursor === undefined ? "" : html`<a href="${base}/records${listSearch(query)}">« first page</a>`}${
    more === undefined ? "" : html`<a href="${more}" rel="next">next page »</a>`
  }</p>`;
}

function describeQuery(query: ListQuery): string {
  const parts: string[] = [];
  if (query.states.length > 0) parts.push(`state ${query.states.join(" or ")}`);
  if (query.tools.length > 0) parts.push(`tool ${query.tools.join(" or ")}`);
  if (query.olderThanMs !== undefined)
    parts.push(`unchanged for ${formatDuration(query.olderThanMs)} or more`);
  return parts.length === 0 ? "" : ` (${parts.join(", ")})`;
}

// --- one record --------------------------------------------------------------------------------------------

export interface RecordView {
  key: string;
  record: OnceRecord | undefined;
  now: number;
  /** A note at the top: what just happened. */
  flash?: { kind: "ok" | "refused" | "problem"; text: string };
  form?: ResolveForm;
  decideForm?: DecideForm;
}

export function recordBody(ctx: PageContext, view: RecordView, live: Html): Html {
  const { record } = view;
  const flash =
    view.flash === undefined ? "" : html`<p class="flash flash-${view.flash.kind}">${view.flash.text}</p>`;
  return html`<h1>Record <code class="key">${view.key}</code></h1>
${flash}
<div id="live" data-live="${ctx.base}/records/${view.key}?live=1">${live}</div>
${record?.state === "unknown" ? resolveSection(ctx, view.key, record, view.form ?? {}) : ""}${
  record?.state === "awaiting_approval" &&
  record.approval !== undefined &&
  record.approval.expiresAt > view.now
    ? html`<section class="decide"><h2>Decide this approval request</h2>
<p>Approving lets the next attempt run the effect, once; denying fails the call for good. The decision is fenced on fence ${record.fence} and bound to the fingerprint shown: if the record moves on meanwhile, it is refused and nothing changes.</p>
${decideForm(ctx, record, `${ctx.base}/records/${view.key}`, view.decideForm)}</section>`
    : ""
}`;
}

export function recordLive(ctx: PageContext, key: string, record: OnceRecord | undefined, now: number): Html {
  if (record === undefined) {
    return html`<p class="empty">No record for this key: never claimed, expired after its retention, or under another prefix.</p>`;
  }
  const r = record;
  const rows: [string, Html | string][] = [
    ["state", html`${stateBadge(r.state)} <span class="meaning">${stateMeaning(r, now)}</span>`],
    ["tool", r.tool],
    ["phase", r.phase],
    ["fence", String(r.fence)],
    ["owner", r.owner ?? "-"],
    ["lease", lease(r, now)],
    ["claims", String(r.claims)],
    ["created", when(r.createdAt, now)],
    ["updated", when(r.updatedAt, now)],
    [
      "expires",
      r.ttlMs === undefined ? "never (no TTL: not written by once?)" : `in ${formatDuration(r.ttlMs)}`,
    ],
    ["fingerprint", html`<code>${r.fingerprint}</code>`],
  ];
  if (r.trace !== undefined) rows.push(["trace", trace(ctx, r.trace)]);
  if (r.result !== undefined) rows.push(["result", html`<pre class="value">${prettyJson(r.result)}</pre>`]);
  if (r.error !== undefined) rows.push(["error", html`<pre class="value">${errorText(r.error)}</pre>`]);
  if (r.approval !== undefined) {
    const a = r.approval;
    rows.push([
      "approval",
      html`asked ${when(a.requestedAt, now)}: <q>${a.reason}</q>; ${expiry(a.expiresAt, now)}`,
    ]);
    if (a.decision !== undefined) rows.push(["decision", decisionText(a.decision, now)]);
  }
  if (r.task !== undefined) rows.push(["task", taskLink(ctx, r.task)]);
  if (r.cancellation !== undefined) rows.push(["cancellation", cancellationText(r.cancellation, now)]);
  if (r.resolution !== undefined) {
    const res = r.resolution;
    rows.push([
      "resolution",
      html`<strong>${res.as.replace("_", " ")}</strong> by <strong>${res.by}</strong>, ${when(res.at, now)}: <q>${res.why}</q>`,
    ]);
  }
  return html`<table class="fields" data-key="${key}">
<tbody>${rows.map(([name, value]) => html`<tr><th>${name}</th><td data-field="${name}">${value}</td></tr>`)}</tbody>
</table>`;
}

function resolveSection(ctx: PageContext, key: string, record: OnceRecord, form: ResolveForm): Html {
  const { base } = ctx;
  const heading = html`<h2>Resolve this unknown record</h2>
<p>Find out whether the effect happened (at the provider, with the key), then say so here. It is fenced on fence ${record.fence}: if the record moves on meanwhile, the resolution is refused and nothing changes.</p>`;
  if (ctx.writes.can !== true) {
    const why =
      ctx.writes.why === "login"
        ? html`<a href="${base}/login?next=${encodeURIComponent(`${base}/records/${key}`)}">Log in</a> with the console's token to resolve it here, or use the command line:`
        : ctx.writes.why === "forbidden"
          ? html`You may not resolve records here. With access to the store, use the command line:`
          : html`This console is read-only (start it with writes allowed to resolve here). With access to the store, use the command line:`;
    const on = ctx.commandOptions === undefined ? "" : ` ${ctx.commandOptions}`;
    return html`<section class="resolve">${heading}<p>${why}</p>
<pre class="value">once resolve ${key}${on} --applied --result '&lt;json&gt;' --why '…'
once resolve ${key}${on} --not-applied --why '…'
once resolve ${key}${on} --failed --error '&lt;message&gt;' --why '…'</pre></section>`;
  }
  const checked = (as: string) => ((form.as ?? "applied") === as ? html` checked` : "");
  return html`<section class="resolve">${heading}
<form method="post" action="${base}/records/${key}/resolve">
<input type="hidden" name="csrf" value="${ctx.csrf}">
<input type="hidden" name="fence" value="${record.fence}">
<fieldset class="choice">
<label><input type="radio" name="as" value="applied"${checked("applied")}> <strong>Applied</strong>: the effect happened. Its result is stored and replayed to every later attempt; nothing runs again.</label>
<label class="sub">result (JSON) <textarea name="result" rows="3" placeholder='{"chargeId": "ch_123"}'>${form.result ?? ""}</textarea></label>
<label><input type="radio" name="as" value="not_applied"${checked("not_applied")}> <strong>Not applied</strong>: the effect did not happen. The key is released and the next attempt <strong>runs the effect again</strong>: be sure.</label>
<label><input type="radio" name="as" value="failed"${checked("failed")}> <strong>Failed</strong>: the call fails for good; every later attempt gets this error.</label>
<label class="sub">error message <input type="text" name="error" value="${form.error ?? ""}"></label>
<label class="sub">error code <input type="text" name="code" value="${form.code ?? ""}" placeholder="optional"></label>
</fieldset>
${
  ctx.writes.user === undefined
    ? html`<label>who decides <input type="text" name="by" value="${form.by ?? ""}" required placeholder="your name"></label>`
    : html`<p>resolved by <strong>${ctx.writes.user}</strong></p>`
}
<label>why <textarea name="why" rows="2" required placeholder="what you found, e.g. the charge is in the provider's dashboard">${form.why ?? ""}</textarea></label>
<button type="submit">Resolve</button>
</form></section>`;
}

// --- waiting for approval -----------------------------------------------------------------------------------

export function approvalsBody(
  ctx: PageContext,
  live: Html,
  cursor: string | undefined,
  flash: RecordView["flash"] | undefined,
): Html {
  const search = cursor === undefined ? "?live=1" : `?cursor=${encodeURIComponent(cursor)}&live=1`;
  return html`<h1>Waiting for approval</h1>
${flash === undefined ? "" : html`<p class="flash flash-${flash.kind}">${flash.text}</p>`}
<p class="note">Calls whose tool's policy asked a person first: nothing of them ran. Each waits until it is approved (its next attempt runs the effect, once), denied (it fails for good) or its request expires.</p>
<div id="live" data-live="${ctx.base}/approvals${search}">${live}</div>`;
}

export function approvalsLive(ctx: PageContext, page: RecordPage, cursor: string | undefined): Html {
  const { base } = ctx;
  const records = [...page.records].sort(
    (a, b) => (a.approval?.requestedAt ?? a.updatedAt) - (b.approval?.requestedAt ?? b.updatedAt),
  );
  const rows = records.map((r) => {
    const a = r.approval;
    return html`<tr data-key="${r.key}">
<td class="key"><a href="${base}/records/${r.key}" title="${r.key}">${r.key.slice(0, 12)}…</a>${r.task === undefined ? "" : html`<br>${taskLink(ctx, r.task)}`}</td>
<td>${r.tool}</td>
<td class="reason">${a?.reason ?? "-"}</td>
<td>${a === undefined ? "-" : html`<time datetime="${new Date(a.requestedAt).toISOString()}">${ago(a.requestedAt, page.now)}</time>`}</td>
<td>${a === undefined ? "-" : expiry(a.expiresAt, page.now)}</td>
<td><code class="fingerprint" title="${r.fingerprint}">${r.fingerprint.slice(0, 16)}${r.fingerprint.length > 16 ? "…" : ""}</code></td>
<td>${r.trace === undefined ? "-" : traceLink(ctx, r.trace)}</td>
<td class="decide">${a !== undefined && a.expiresAt > page.now ? decideForm(ctx, r, `${base}/approvals`) : "-"}</td>
</tr>`;
  });
  const more =
    page.cursor === undefined ? undefined : `${base}/approvals?cursor=${encodeURIComponent(page.cursor)}`;
  return html`${
    records.length === 0
      ? html`<p class="empty">No call is waiting for approval${cursor === undefined ? "" : " on this page"}.</p>`
      : html`<table class="records approvals">
<thead><tr><th>key</th><th>tool</th><th>reason</th><th>requested</th><th>expires</th><th>fingerprint</th><th>trace</th><th>decision</th></tr></thead>
<tbody>${rows}</tbody>
</table>`
  }
<p class="note">${records.length} waiting, oldest request first, from ${page.examined} key${page.examined === 1 ? "" : "s"} looked at${page.cursor === undefined ? "." : "; there are more keys."} While you type in a form, this list stops refreshing.</p>
<p class="pages">${cursor === undefined ? "" : html`<a href="${base}/approvals">« first page</a>`}${
    more === undefined ? "" : html`<a href="${more}" rel="next">next page »</a>`
  }</p>`;
}

/**
 * The approve / deny form of one pending request, or what to do instead when this person may not decide here.
 * It carries the fence and the fingerprint shown, so the decision is about this call as it was seen.
 */
export function decideForm(ctx: PageContext, record: OnceRecord, back: string, form?: DecideForm): Html {
  const { base } = ctx;
  if (ctx.writes.can !== true) {
    const on = ctx.commandOptions === undefined ? "" : ` ${ctx.commandOptions}`;
    const why =
      ctx.writes.why === "login"
        ? html`<a href="${base}/login?next=${encodeURIComponent(back)}">Log in</a> to decide here, or:`
        : ctx.writes.why === "forbidden"
          ? html`You may not decide here; with access to the store:`
          : html`Read-only; with access to the store:`;
    return html`<div class="decide-elsewhere">${why}<pre class="value">once approve ${record.key}${on} --fingerprint ${record.fingerprint} --why '…'
once deny ${record.key}${on} --fingerprint ${record.fingerprint} --why '…'</pre></div>`;
  }
  return html`<form method="post" action="${base}/records/${record.key}/decide" class="decide">
<input type="hidden" name="csrf" value="${ctx.csrf}">
<input type="hidden" name="fence" value="${record.fence}">
<input type="hidden" name="fingerprint" value="${record.fingerprint}">
<input type="hidden" name="back" value="${back}">
${
  ctx.writes.user === undefined
    ? html`<label>who decides <input type="text" name="by" value="${form?.by ?? ""}" required placeholder="your name"></label>`
    : html`<span>decided by <strong>${ctx.writes.user}</strong></span>`
}
<label>why <input type="text" name="why" value="${form?.why ?? ""}" required placeholder="kept on the record"></label>
<button type="submit" name="decision" value="approve" class="approve">Approve</button>
<button type="submit" name="decision" value="deny" class="deny">Deny</button>
</form>`;
}

// --- one task ----------------------------------------------------------------------------------------------

export interface TaskView {
  ref: { namespace: string; taskId: string };
  /** The task as read, when the store answered. */
  task: TaskRecords | undefined;
  flash?: { kind: "ok" | "refused" | "problem"; text: string };
  cancelForm?: DecideForm;
}

export function taskBody(ctx: PageContext, view: TaskView, live: Html): Html {
  const { ref } = view;
  const flash =
    view.flash === undefined ? "" : html`<p class="flash flash-${view.flash.kind}">${view.flash.text}</p>`;
  const path = taskPath(ctx, ref);
  return html`<h1>Task <code>${ref.taskId}</code>${ref.namespace === "default" ? "" : html` <span class="step">namespace ${ref.namespace}</span>`}</h1>
${flash}
<div id="live" data-live="${path}?live=1">${live}</div>
${view.task !== undefined && view.task.cancellation === undefined ? cancelSection(ctx, view) : ""}`;
}

export function taskLive(ctx: PageContext, task: TaskRecords, now: number): Html {
  const { base } = ctx;
  const status =
    task.cancellation === undefined
      ? html`<p class="task-status">Not cancelled.</p>`
      : html`<p class="task-status cancelled"><span class="state state-cancelled">cancelled</span> ${cancellationText(task.cancellation, now)}</p>`;
  if (task.records.length === 0)
    return html`${status}<p class="empty">No call is filed under this task${
      task.cancellation === undefined
        ? " (never claimed with it, or expired after its retention)"
        : ": each that comes is answered cancelled"
    }.</p>`;
  const rows = task.records.map(
    (r, i) => html`<tr data-key="${r.key}">
<td class="num">${i + 1}</td>
<td>${r.task?.stepId ?? "-"}</td>
<td>${stateBadge(r.state)}</td>
<td>${r.tool}</td>
<td class="outcome">${callOutcome(r)}</td>
<td class="approval">${approvalCell(ctx, r, now, taskPath(ctx, task))}</td>
<td>${r.trace === undefined ? "-" : traceLink(ctx, r.trace)}</td>
<td class="key"><a href="${base}/records/${r.key}" title="${r.key}">${r.key.slice(0, 12)}…</a></td>
</tr>`,
  );
  return html`${status}
<table class="records task">
<thead><tr><th class="num">#</th><th>step</th><th>state</th><th>tool</th><th>outcome</th><th>approval</th><th>trace</th><th>key</th></tr></thead>
<tbody>${rows}</tbody>
</table>
<p class="note">${task.records.length} call${task.records.length === 1 ? "" : "s"}, in the order of their first claim.</p>`;
}

/** What the call came to: its result, its error, or what it waits for. */
function callOutcome(record: OnceRecord): Html | string {
  if (record.state === "done") return record.result === undefined ? "-" : html`<code>${record.result}</code>`;
  if (record.error !== undefined) return errorText(record.error);
  if (record.state === "cancelled") return "never ran";
  if (record.state === "awaiting_approval") return "waits for a person";
  // Its effect may have been under way when the task was cancelled: its owner was told to stop.
  if (record.cancellation !== undefined) return "told to stop (task cancelled)";
  return "-";
}

/** The approval request and its decision, with the form while it waits. */
function approvalCell(ctx: PageContext, record: OnceRecord, now: number, back: string): Html | string {
  const a = record.approval;
  if (a === undefined) return "-";
  const asked = html`asked: <q>${a.reason}</q>`;
  if (a.decision !== undefined) return html`${asked}<br>${decisionText(a.decision, now)}`;
  if (record.state !== "awaiting_approval") return asked;
  return html`${asked}; ${expiry(a.expiresAt, now)}${a.expiresAt > now ? decideForm(ctx, record, back) : ""}`;
}

function cancelSection(ctx: PageContext, view: TaskView): Html {
  const { base } = ctx;
  const path = taskPath(ctx, view.ref);
  const heading = html`<h2>Cancel this task</h2>
<p>After the cancel returns no effect of this task starts: calls that have not started their effect (waiting for approval, approved, released, not yet claimed) never run and are answered cancelled; a call whose effect may be under way is told to stop at its next heartbeat and settles as usual. Done and failed calls are left as they are. A task is cancelled once.</p>`;
  if (ctx.writes.can !== true) {
    const on = ctx.commandOptions === undefined ? "" : ` ${ctx.commandOptions}`;
    const ns = view.ref.namespace === "default" ? "" : ` --namespace ${view.ref.namespace}`;
    const why =
      ctx.writes.why === "login"
        ? html`<a href="${base}/login?next=${encodeURIComponent(path)}">Log in</a> with the console's token to cancel it here, or use the command line:`
        : ctx.writes.why === "forbidden"
          ? html`You may not cancel tasks here. With access to the store, use the command line:`
          : html`This console is read-only. With access to the store, use the command line:`;
    return html`<section class="cancel">${heading}<p>${why}</p>
<pre class="value">once cancel --task ${view.ref.taskId}${ns}${on} --why '…'</pre></section>`;
  }
  const form = view.cancelForm;
  return html`<section class="cancel">${heading}
<form method="post" action="${path}/cancel" class="cancel">
<input type="hidden" name="csrf" value="${ctx.csrf}">
${
  ctx.writes.user === undefined
    ? html`<label>who cancels <input type="text" name="by" value="${form?.by ?? ""}" required placeholder="your name"></label>`
    : html`<span>cancelled by <strong>${ctx.writes.user}</strong></span>`
}
<label>why <input type="text" name="why" value="${form?.why ?? ""}" required placeholder="kept with the task" size="40"></label>
<button type="submit" class="cancel">Cancel the task</button>
</form></section>`;
}

// --- small pieces ------------------------------------------------------------------------------------------

export function loginBody(ctx: PageContext, next: string, problem?: string): Html {
  return html`<h1>Log in to resolve records</h1>
${problem === undefined ? "" : html`<p class="flash flash-refused">${problem}</p>`}
<form method="post" action="${ctx.base}/login" class="login">
<input type="hidden" name="csrf" value="${ctx.csrf}">
<input type="hidden" name="next" value="${next}">
<label>the console's token <input type="password" name="token" autocomplete="current-password" required></label>
<button type="submit">Log in</button>
</form>
<p class="note">The token is the one the console was started with. Reading needs none.</p>`;
}

export function messageBody(title: string, text: string, back?: { href: string; label: string }): Html {
  return html`<h1>${title}</h1><p class="flash flash-refused">${text}</p>${
    back === undefined ? "" : html`<p><a href="${back.href}">${back.label}</a></p>`
  }`;
}

function stateBadge(state: RecordState): Html {
  return html`<span class="state state-${state}">${state}</span>`;
}

/** The lease, counting down in the browser from the server's figure. */
function lease(record: OnceRecord, now: number): Html | string {
  if (record.leaseUntil === undefined) return "-";
  return html`<span class="lease" data-lease-left="${leaseRemaining(record, now)}">${leaseText(record, now)}</span>`;
}

function when(at: number, now: number): Html {
  return html`<time datetime="${new Date(at).toISOString()}">${new Date(at).toISOString()}</time> (${ago(at, now)})`;
}

function expiry(expiresAt: number, now: number): Html {
  const left = expiresAt - now;
  return html`<time datetime="${new Date(expiresAt).toISOString()}" class="${left <= 0 ? "expired" : ""}">${
    left > 0 ? `expires in ${formatDuration(left)}` : `expired ${formatDuration(-left)} ago`
  }</time>`;
}

function decisionText(decision: ApprovalDecision, now: number): Html {
  if (decision.as === "expired")
    return html`<strong>expired</strong> with no decision, noticed ${when(decision.at, now)}`;
  return html`<strong>${decision.as}</strong> by <strong>${decision.by}</strong>, ${when(decision.at, now)}${decision.why === "" ? "" : html`: <q>${decision.why}</q>`}`;
}

export function cancellationText(cancellation: Cancellation, now: number): Html {
  return html`cancelled by <strong>${cancellation.by}</strong>, ${when(cancellation.at, now)}${cancellation.why === "" ? "" : html`: <q>${cancellation.why}</q>`}`;
}

/** The path of a task's page. */
export function taskPath(ctx: PageContext, task: { namespace: string; taskId: string }): string {
  return `${ctx.base}/tasks/${encodeURIComponent(task.namespace)}/${encodeURIComponent(task.taskId)}`;
}

function taskLink(ctx: PageContext, task: TaskIdentity): Html {
  return html`<a class="task" href="${taskPath(ctx, task)}">task ${task.taskId}</a> <span class="step">(${task.namespace === "default" ? "" : `namespace ${task.namespace}, `}step ${task.stepId})</span>`;
}

/** A trace id's link to Jaeger, or the traceparent as it is. */
function traceLink(ctx: PageContext, traceparent: string): Html {
  const id = traceIdOf(traceparent);
  if (id === undefined || ctx.jaegerUrl === undefined) return html`<code>${traceparent.slice(3, 19)}…</code>`;
  return html`<a class="trace" href="${ctx.jaegerUrl}/trace/${id}" target="_blank" rel="noopener noreferrer">${id.slice(0, 8)}…</a>`;
}

function trace(ctx: PageContext, traceparent: string): Html {
  const id = traceIdOf(traceparent);
  if (id === undefined || ctx.jaegerUrl === undefined) return html`<code>${traceparent}</code>`;
  return html`<code>${traceparent}</code> <a class="trace" href="${ctx.jaegerUrl}/trace/${id}" target="_blank" rel="noopener noreferrer">open the trace in Jaeger</a>`;
}

function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
