import {
  type CancelOutcome,
  CancelRefusedError,
  DecisionRefusedError,
  deriveTaskKey,
  InvalidKeyPartError,
  isKey,
  type OnceRecord,
  type OperatorStore,
  RECORD_STATES,
  type RecordState,
  type ResolveDecision,
  StoreUnavailableError,
  type TaskRecords,
  type TaskRef,
} from "@once/core";
import { readDuration } from "@once/core/internal";
import { emptyLive, type Reply, unavailableReason } from "./reply.js";
import type { Route } from "./router.js";
import {
  type CookieSettings,
  csrfProblem,
  SESSION_COOKIE,
  SESSION_MAX_AGE_S,
  sameSecret,
  sessionFor,
  setCookie,
} from "./security.js";
import {
  approvalsBody,
  approvalsLive,
  type DecideForm,
  type ListQuery,
  listBody,
  listLive,
  loginBody,
  messageBody,
  overviewBody,
  overviewLive,
  type PageContext,
  type RecordView,
  type ResolveForm,
  recordBody,
  recordLive,
  type TaskView,
  taskBody,
  taskLive,
  taskPath,
  unreachableBanner,
} from "./views.js";

// The console's pages: each a handler of one route of the table below, answering through the request's Reply.

/** What the pages share for the console's lifetime. */
export interface ConsoleApp {
  store: OperatorStore;
  /** Where the console is mounted: "" or "/once". */
  base: string;
  pageSize: number;
  allowWrites: boolean;
  token: string | undefined;
}

/** One request to a page: what its handler reads, and how it answers. */
export interface PageCall {
  request: Request;
  url: URL;
  reply: Reply;
  /** How the console's cookies are set for this request (its path, Secure over https). */
  cookies: CookieSettings;
}

const MAX_FORM_BYTES = 2 * 1024 * 1024;

/** The table: every page of the console, by method and path within the console. */
export function consoleRoutes(app: ConsoleApp): Route<PageCall>[] {
  const { token } = app;
  // Logging in is there only when there is a token to log in with and something it allows.
  const login: Route<PageCall>[] =
    token !== undefined && app.allowWrites
      ? [
          { method: "GET", path: "/login", handle: (call) => loginForm(app, call) },
          { method: "POST", path: "/login", handle: (call) => logIn(app, call, token) },
        ]
      : [];
  return [
    { method: "GET", path: "/", handle: (call) => overview(app, call) },
    { method: "GET", path: "/records", handle: (call) => records(app, call) },
    { method: "GET", path: "/records/:key", handle: ofRecord(app, record) },
    { method: "POST", path: "/records/:key/resolve", handle: ofRecord(app, resolve) },
    { method: "POST", path: "/records/:key/decide", handle: ofRecord(app, decide) },
    { method: "GET", path: "/approvals", handle: (call) => approvals(app, call) },
    { method: "GET", path: "/tasks/:namespace/:taskId", handle: ofTask(app, task) },
    { method: "POST", path: "/tasks/:namespace/:taskId/cancel", handle: ofTask(app, cancel) },
    ...login,
    { method: "POST", path: "/logout", handle: (call) => logOut(app, call) },
  ];
}

/** The page for a path the table does not have. */
export function notFound(app: ConsoleApp, { reply }: PageCall): Response {
  return reply.page(
    404,
    "Not found",
    messageBody("Not found", "The console has no such page.", { href: `${app.base}/`, label: "overview" }),
  );
}

function overview(app: ConsoleApp, { reply }: PageCall): Promise<Response> {
  return reply.reading(
    "Overview",
    async () => overviewLive(reply.ctx, await app.store.count()),
    (part) => overviewBody(reply.ctx, part),
  );
}

async function records(app: ConsoleApp, { url, reply }: PageCall): Promise<Response> {
  const query = listQuery(url.searchParams);
  if (typeof query === "string")
    return reply.page(400, "Records", listBody(reply.ctx, { states: [], tools: [] }, emptyLive(), query));
  return reply.reading(
    "Records",
    async () => {
      const page = await app.store.list({ ...query, limit: app.pageSize, maxExamined: app.pageSize * 100 });
      return listLive(reply.ctx, query, page);
    },
    (part) => listBody(reply.ctx, query, part),
  );
}

/** The handler of a record's route: the path's `:key`, lowercased, must be a key before `page` runs. */
function ofRecord(
  app: ConsoleApp,
  page: (app: ConsoleApp, call: PageCall, key: string) => Promise<Response>,
): Route<PageCall>["handle"] {
  return async (call, params) => {
    const key = params.key?.toLowerCase();
    if (key !== undefined && isKey(key)) return page(app, call, key);
    return call.reply.page(
      404,
      "No such record",
      messageBody("No such record", "That is not a key: expected 64 hex characters.", {
        href: `${app.base}/records`,
        label: "all records",
      }),
    );
  };
}

async function record(app: ConsoleApp, { url, reply }: PageCall, key: string): Promise<Response> {
  const flash = flashOf(url.searchParams.get("resolved")) ?? decidedFlash(url.searchParams);
  let read: { record: OnceRecord | undefined; now: number } | undefined;
  return reply.reading(
    `Record ${key.slice(0, 12)}…`,
    async () => {
      read = { record: await app.store.get(key), now: await app.store.now() };
      return recordLive(reply.ctx, key, read.record, read.now);
    },
    // The full page also carries the resolve form, which needs the record itself.
    (part) =>
      recordBody(
        reply.ctx,
        { key, record: read?.record, now: read?.now ?? 0, ...(flash ? { flash } : {}) },
        part,
      ),
  );
}

async function resolve(app: ConsoleApp, call: PageCall, key: string): Promise<Response> {
  const { reply } = call;
  const { ctx } = reply;
  const back = { href: `${app.base}/records/${key}`, label: "back to the record" };
  const form = await writeForm(app, call, RESOLVING, back);
  if (form instanceof Response) return form;
  const entered: ResolveForm = {};
  for (const name of ["as", "result", "error", "code", "by", "why"] as const) {
    const value = form.get(name);
    if (value !== null) entered[name] = value;
  }
  const decision = decisionOf(entered);
  const by = writerOf(ctx) ?? entered.by?.trim() ?? "";
  const why = entered.why?.trim() ?? "";
  const fence = Number(form.get("fence"));
  const problem =
    typeof decision === "string"
      ? decision
      : by === ""
        ? "Say who decides."
        : why === ""
          ? "Say why: it is kept on the record."
          : !Number.isSafeInteger(fence)
            ? "The form has no fence: reload the page."
            : undefined;
  try {
    if (problem !== undefined || typeof decision === "string") {
      const record = await app.store.get(key);
      const view: RecordView = {
        key,
        record,
        now: await app.store.now(),
        form: entered,
        flash: { kind: "problem", text: `Not resolved: ${problem}` },
      };
      return reply.page(400, "Not resolved", recordBody(ctx, view, recordLive(ctx, key, record, view.now)));
    }
    const outcome = await app.store.resolve(key, { decision, by, why, expectFence: fence });
    if (outcome.outcome === "resolved")
      return reply.redirect(`${app.base}/records/${key}?resolved=${decision.as}`);
    const now = await app.store.now();
    const view: RecordView = {
      key,
      record: outcome.record,
      now,
      form: entered,
      flash: { kind: "refused", text: `Refused: ${outcome.reason}. Nothing changed.` },
    };
    return reply.page(409, "Refused", recordBody(ctx, view, recordLive(ctx, key, outcome.record, now)));
  } catch (error) {
    if (!(error instanceof StoreUnavailableError)) throw error;
    return reply.page(
      503,
      "Not resolved",
      messageBody(
        "Not resolved",
        `The store is unreachable (${unavailableReason(error)}), so nothing was resolved. Try again once it answers.`,
        back,
      ),
      unreachableBanner(ctx, unavailableReason(error), false),
    );
  }
}

/** A kind of write, in the words its refusals use. */
interface WriteKind {
  /** The page's title when refused: "Not resolved". */
  refused: string;
  /** What needs the token: "Resolving". */
  doing: string;
  /** What the host app may not let a request do: "resolve records". */
  what: string;
}

const RESOLVING: WriteKind = { refused: "Not resolved", doing: "Resolving", what: "resolve records" };
const DECIDING: WriteKind = { refused: "Not decided", doing: "Deciding", what: "decide approval requests" };
const CANCELLING: WriteKind = { refused: "Not cancelled", doing: "Cancelling", what: "cancel tasks" };

/**
 * Every write's gate, one for all of them: writes allowed, the form small enough, posted from the console's
 * own page (CSRF), by someone who may write (the token's login, or the host app's hook). Answers the form, or
 * the refusal page — and then nothing has been read from the store, let alone changed.
 */
async function writeForm(
  app: ConsoleApp,
  { request, reply }: PageCall,
  kind: WriteKind,
  back: { href: string; label: string },
): Promise<URLSearchParams | Response> {
  const { ctx } = reply;
  const refuse = (status: number, why: string) =>
    reply.page(status, kind.refused, messageBody(kind.refused, `${why} Nothing changed.`, back));
  if (!app.allowWrites)
    return refuse(403, "This console is read-only: it was started without writes allowed.");
  const form = await formOf(request);
  if (form === undefined) return refuse(413, "The form is too large.");
  const csrfRefusal = csrfProblem(request, form.get("csrf"));
  if (csrfRefusal !== undefined)
    return refuse(
      403,
      `The write did not come from this console's own page (${csrfRefusal}). Reload the page and try again.`,
    );
  if (ctx.writes.can !== true) {
    return ctx.writes.why === "login"
      ? refuse(401, `${kind.doing} needs the console's token: log in first.`)
      : refuse(403, `The host app does not let this request ${kind.what}.`);
  }
  return form;
}

async function approvals(app: ConsoleApp, { url, reply }: PageCall): Promise<Response> {
  const cursor = url.searchParams.get("cursor") || undefined;
  const flash = decidedFlash(url.searchParams);
  return reply.reading(
    "Waiting for approval",
    async () => {
      const page = await app.store.list({
        states: ["awaiting_approval"],
        limit: app.pageSize,
        maxExamined: app.pageSize * 100,
        ...(cursor === undefined ? {} : { cursor }),
      });
      return approvalsLive(reply.ctx, page, cursor);
    },
    (part) => approvalsBody(reply.ctx, part, cursor, flash),
  );
}

/**
 * A person's approve or deny of one call waiting for approval, through the store's fenced decision bound to
 * the fingerprint the page showed: any other record (decided meanwhile, expired, another call) is refused by
 * the store and shown so, nothing changed.
 */
async function decide(app: ConsoleApp, call: PageCall, key: string): Promise<Response> {
  const { reply, url } = call;
  const { ctx } = reply;
  const recordPage = `${app.base}/records/${key}`;
  const form = await writeForm(app, call, DECIDING, { href: recordPage, label: "back to the record" });
  if (form instanceof Response) return form;
  const verb = form.get("decision");
  const entered: DecideForm = { by: form.get("by") ?? "", why: form.get("why") ?? "" };
  const by = writerOf(ctx) ?? entered.by.trim();
  const why = entered.why.trim();
  const fence = Number(form.get("fence"));
  const fingerprint = form.get("fingerprint") ?? "";
  const problem =
    verb !== "approve" && verb !== "deny"
      ? "Choose approve or deny."
      : by === ""
        ? "Say who decides."
        : why === ""
          ? "Say why: it is kept on the record."
          : form.get("fence") === null || !Number.isSafeInteger(fence) || fingerprint === ""
            ? "The form has no fence or fingerprint: reload the page."
            : undefined;
  const shown = async (status: number, title: string, flash: RecordView["flash"]) => {
    const record = await app.store.get(key);
    const now = await app.store.now();
    const view: RecordView = { key, record, now, decideForm: entered, ...(flash ? { flash } : {}) };
    return reply.page(status, title, recordBody(ctx, view, recordLive(ctx, key, record, now)));
  };
  try {
    if (problem !== undefined || (verb !== "approve" && verb !== "deny"))
      return await shown(400, "Not decided", { kind: "problem", text: `Not decided: ${problem}` });
    try {
      await app.store[verb](key, { by, why, expectFence: fence, fingerprint });
    } catch (error) {
      if (!(error instanceof DecisionRefusedError)) throw error;
      return await shown(409, "Refused", {
        kind: "refused",
        text: `Refused: ${error.reason}. Nothing changed.`,
      });
    }
    const back = safeNext(app, form.get("back"), url.origin);
    const target = new URL(back === `${app.base}/` ? recordPage : back, url.origin);
    target.searchParams.set("decided", verb === "approve" ? "approved" : "denied");
    target.searchParams.set("key", key);
    return reply.redirect(`${target.pathname}${target.search}`);
  } catch (error) {
    if (!(error instanceof StoreUnavailableError)) throw error;
    return reply.page(
      503,
      "Not decided",
      messageBody(
        "Not decided",
        `The store is unreachable (${unavailableReason(error)}), so nothing was decided. Try again once it answers.`,
        { href: recordPage, label: "back to the record" },
      ),
      unreachableBanner(ctx, unavailableReason(error), false),
    );
  }
}

/** The handler of a task's route: the path's namespace and task id must be key parts before `page` runs. */
function ofTask(
  app: ConsoleApp,
  page: (app: ConsoleApp, call: PageCall, task: Required<TaskRef>) => Promise<Response>,
): Route<PageCall>["handle"] {
  return async (call, params) => {
    const task = { namespace: params.namespace ?? "", taskId: params.taskId ?? "" };
    try {
      deriveTaskKey(task);
    } catch (error) {
      if (!(error instanceof InvalidKeyPartError)) throw error;
      return call.reply.page(
        404,
        "No such task",
        messageBody("No such task", `That is not a task: ${error.message}.`, {
          href: `${app.base}/records`,
          label: "all records",
        }),
      );
    }
    return page(app, call, task);
  };
}

async function task(app: ConsoleApp, { url, reply }: PageCall, ref: Required<TaskRef>): Promise<Response> {
  const flash = cancelledFlash(url.searchParams) ?? decidedFlash(url.searchParams);
  let read: { task: TaskRecords; now: number } | undefined;
  return reply.reading(
    `Task ${ref.taskId}`,
    async () => {
      read = { task: await app.store.task(ref), now: await app.store.now() };
      return taskLive(reply.ctx, read.task, read.now);
    },
    // The full page also carries the cancel form, which needs to know whether the task is cancelled.
    (part) => taskBody(reply.ctx, { ref, task: read?.task, ...(flash ? { flash } : {}) }, part),
  );
}

/**
 * Cancels the task through the store, once: a task cancelled before (here or anywhere) is refused with the
 * first cancel's who, why and when, nothing changed.
 */
async function cancel(app: ConsoleApp, call: PageCall, ref: Required<TaskRef>): Promise<Response> {
  const { reply } = call;
  const { ctx } = reply;
  const page = taskPath(ctx, ref);
  const back = { href: page, label: "back to the task" };
  const form = await writeForm(app, call, CANCELLING, back);
  if (form instanceof Response) return form;
  const entered: DecideForm = { by: form.get("by") ?? "", why: form.get("why") ?? "" };
  const by = writerOf(ctx) ?? entered.by.trim();
  const why = entered.why.trim();
  const problem =
    by === "" ? "Say who cancels." : why === "" ? "Say why: it is kept with the task." : undefined;
  const shown = async (status: number, title: string, flash: NonNullable<TaskView["flash"]>) => {
    const read = await app.store.task(ref);
    const now = await app.store.now();
    const view: TaskView = { ref, task: read, flash, cancelForm: entered };
    return reply.page(status, title, taskBody(ctx, view, taskLive(ctx, read, now)));
  };
  try {
    if (problem !== undefined)
      return await shown(400, "Not cancelled", { kind: "problem", text: `Not cancelled: ${problem}` });
    let outcome: CancelOutcome;
    try {
      outcome = await app.store.cancel(ref, { by, why });
    } catch (error) {
      if (!(error instanceof CancelRefusedError)) throw error;
      return await shown(409, "Refused", {
        kind: "refused",
        text: `Refused: ${error.reason}. Nothing changed.`,
      });
    }
    if (outcome.outcome === "already_cancelled") {
      const { cancellation: first } = outcome;
      return await shown(409, "Refused", {
        kind: "refused",
        text: `Refused: the task was already cancelled by ${first.by} at ${new Date(first.at).toISOString()}${first.why === "" ? "" : ` (${first.why})`}. Nothing changed.`,
      });
    }
    return reply.redirect(`${page}?cancelled=${outcome.stopped.length}&running=${outcome.running.length}`);
  } catch (error) {
    if (!(error instanceof StoreUnavailableError)) throw error;
    return reply.page(
      503,
      "Not cancelled",
      messageBody(
        "Not cancelled",
        `The store is unreachable (${unavailableReason(error)}), so nothing was cancelled. Try again once it answers.`,
        back,
      ),
      unreachableBanner(ctx, unavailableReason(error), false),
    );
  }
}

/** What the task's page says after its cancel (`?cancelled=<stopped>&running=<running>`). */
function cancelledFlash(params: URLSearchParams): TaskView["flash"] | undefined {
  const stopped = Number(params.get("cancelled"));
  const running = Number(params.get("running") ?? "0");
  if (params.get("cancelled") === null || !Number.isSafeInteger(stopped) || !Number.isSafeInteger(running))
    return undefined;
  return {
    kind: "ok",
    text:
      `Cancelled: ${stopped} call${stopped === 1 ? "" : "s"} not started (now cancelled, never run), ` +
      `${running} whose effect may be under way (told to stop at the next heartbeat); every later call of the task is answered cancelled.`,
  };
}

/** The person the host app's hook names as writing, who then decides in place of the form's `by`. */
function writerOf(ctx: PageContext): string | undefined {
  return ctx.writes.can === true ? ctx.writes.user : undefined;
}

/** What a page says after a decision made on it (`?decided=approved&key=…`). */
function decidedFlash(params: URLSearchParams): RecordView["flash"] | undefined {
  const key = params.get("key") ?? "";
  const on = isKey(key) ? ` ${key.slice(0, 12)}…` : "";
  switch (params.get("decided")) {
    case "approved":
      return { kind: "ok", text: `Approved${on}: the next attempt of the call runs the effect, once.` };
    case "denied":
      return { kind: "ok", text: `Denied${on}: the call fails for good; every attempt gets the denial.` };
    default:
      return undefined;
  }
}

async function loginForm(app: ConsoleApp, { url, reply }: PageCall): Promise<Response> {
  return reply.page(
    200,
    "Log in",
    loginBody(reply.ctx, safeNext(app, url.searchParams.get("next"), url.origin)),
  );
}

async function logIn(
  app: ConsoleApp,
  { request, url, reply, cookies }: PageCall,
  token: string,
): Promise<Response> {
  const form = await formOf(request);
  if (form === undefined)
    return reply.page(413, "Too large", messageBody("Too large", "The form is too large."));
  const problem = csrfProblem(request, form.get("csrf"));
  if (problem !== undefined)
    return reply.page(
      403,
      "Refused",
      messageBody("Refused", `Not logged in: ${problem}. Reload the page and try again.`),
    );
  const next = safeNext(app, form.get("next"), url.origin);
  if (!sameSecret(form.get("token") ?? "", token))
    return reply.page(401, "Log in", loginBody(reply.ctx, next, "That is not the console's token."));
  reply.setCookie(setCookie(SESSION_COOKIE, sessionFor(token), cookies, SESSION_MAX_AGE_S));
  return reply.redirect(next);
}

async function logOut(app: ConsoleApp, { request, reply, cookies }: PageCall): Promise<Response> {
  const form = await formOf(request);
  if (form !== undefined && csrfProblem(request, form.get("csrf")) === undefined)
    reply.setCookie(setCookie(SESSION_COOKIE, "", cookies, 0));
  return reply.redirect(`${app.base}/`);
}

/**
 * Where the login sends the browser: `next` as a URL parser reads it against the console's own origin —
 * tabs and newlines dropped, backslashes taken as slashes, dot segments applied, as a browser does — if that
 * is a page of this console on this origin; else the overview. The answer is the parsed path, never the
 * text as sent, so what the browser follows is what was checked (and a header can never hold a newline).
 */
function safeNext(app: ConsoleApp, next: string | null, origin: string): string {
  const fallback = `${app.base}/`;
  if (next === null) return fallback;
  let target: URL;
  try {
    target = new URL(next, origin);
  } catch {
    return fallback;
  }
  const path = `${target.pathname}${target.search}${target.hash}`;
  // A path that begins `//` would be read as another host's URL when the browser follows it.
  const ours = target.origin === origin && !path.startsWith("//") && new URL(path, origin).origin === origin;
  return ours && path.startsWith(fallback) ? path : fallback;
}

function listQuery(params: URLSearchParams): ListQuery | string {
  const states = params
    .getAll("state")
    .flatMap((s) => s.split(","))
    .map((s) => s.trim())
    .filter((s) => s !== "");
  for (const state of states) {
    if (!RECORD_STATES.includes(state as RecordState))
      return `${JSON.stringify(state)} is not a state: use ${RECORD_STATES.join(", ")}.`;
  }
  const tools = params
    .getAll("tool")
    .flatMap((t) => t.split(","))
    .map((t) => t.trim())
    .filter((t) => t !== "");
  const older = params.get("older")?.trim() || undefined;
  const olderThanMs = older === undefined ? undefined : readDuration(older);
  if (older !== undefined && olderThanMs === undefined)
    return `${JSON.stringify(older)} is not a duration: use a number with a unit, e.g. 30s, 10m, 2h or 1d.`;
  const cursor = params.get("cursor") || undefined;
  return {
    states: [...new Set(states)] as RecordState[],
    tools: [...new Set(tools)],
    ...(older === undefined ? {} : { olderThan: older }),
    ...(olderThanMs === undefined ? {} : { olderThanMs }),
    ...(cursor === undefined ? {} : { cursor }),
  };
}

function decisionOf(form: ResolveForm): ResolveDecision | string {
  switch (form.as) {
    case "applied": {
      const text = form.result?.trim() ?? "";
      if (text === "") return "Applied needs the effect's result, as JSON.";
      try {
        // Stored as compact JSON, the way the worker stores a result.
        return { as: "applied", result: JSON.stringify(JSON.parse(text)) };
      } catch (error) {
        return `The result is not JSON: ${(error as Error).message}.`;
      }
    }
    case "not_applied":
      return { as: "not_applied" };
    case "failed": {
      const message = form.error?.trim() ?? "";
      if (message === "") return "Failed needs the error message to replay.";
      const code = form.code?.trim() ?? "";
      return { as: "failed", error: { name: "Error", message, ...(code === "" ? {} : { code }) } };
    }
    default:
      return "Choose applied, not applied or failed.";
  }
}

function flashOf(resolved: string | null): RecordView["flash"] | undefined {
  switch (resolved) {
    case "applied":
      return {
        kind: "ok",
        text: "Resolved as applied: the stored result is replayed to every later attempt.",
      };
    case "not_applied":
      return {
        kind: "ok",
        text: "Resolved as not applied: the key is released; the next attempt runs the effect again.",
      };
    case "failed":
      return { kind: "ok", text: "Resolved as failed: every later attempt gets the stored error." };
    default:
      return undefined;
  }
}

async function formOf(request: Request): Promise<URLSearchParams | undefined> {
  const length = Number(request.headers.get("content-length") ?? "0");
  if (length > MAX_FORM_BYTES) return undefined;
  const text = await request.text();
  if (text.length > MAX_FORM_BYTES) return undefined;
  return new URLSearchParams(text);
}
