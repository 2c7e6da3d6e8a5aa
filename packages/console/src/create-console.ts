import { readFileSync } from "node:fs";
import {
  isKey,
  type OnceRecord,
  type OperatorStore,
  RECORD_STATES,
  type RecordState,
  type ResolveDecision,
  StoreUnavailableError,
} from "@once/core";
import { readDuration } from "@once/core/internal";
import { RedisOperatorStore } from "@once/redis";
import type { Cluster, Redis } from "ioredis";
import { type Html, raw } from "./html.js";
import {
  type CookieSettings,
  CSRF_COOKIE,
  cookiesOf,
  csrfProblem,
  hasToken,
  newCsrfToken,
  SESSION_COOKIE,
  SESSION_MAX_AGE_S,
  sameSecret,
  sessionFor,
  setCookie,
} from "./security.js";
import {
  type ListQuery,
  layout,
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
  unreachableBanner,
  type WriteAccess,
} from "./views.js";

/** What the console asks the host app about: seeing the pages, or resolving a record. */
export type ConsoleAction = "read" | "resolve";

/**
 * The host app's say on a request (as bull-board's `visibilityGuard`): false refuses it (403); true allows it;
 * `{ user }` allows it as that person, who is then the one a resolution is kept as made `by`.
 */
export type Authorize = (
  request: Request,
  action: ConsoleAction,
) => boolean | { user: string } | Promise<boolean | { user: string }>;

export interface ConsoleOptions {
  /** The records to show: any OperatorStore (`RedisOperatorStore`, or another store's). */
  store?: OperatorStore;
  /** Or a Redis client (never closed by the console) and the store's prefix (default `"once:"`). */
  redis?: Redis | Cluster;
  prefix?: string;
  /** Where the host app mounts the console, e.g. `/once`; every link starts with it. Default: the root. */
  basePath?: string;
  /**
   * Resolving `unknown` records from the page. Default false: read-only. Needs `token` or `authorize`.
   */
  allowWrites?: boolean;
  /** The secret a person logs in with (or sends as `Authorization: Bearer`) to resolve; 16 characters or more. */
  token?: string;
  /** The host app's own check of every request (reads and resolutions). */
  authorize?: Authorize;
  /** Jaeger's UI, e.g. `http://localhost:16686`: a record's trace links to `<jaegerUrl>/trace/<trace id>`. */
  jaegerUrl?: string;
  /**
   * What `once resolve` needs to reach this store, shown in the commands a page offers when it cannot resolve
   * itself, e.g. `--prefix checkout:`. Default none.
   */
  commandOptions?: string;
  /** How often the pages refresh their figures, ms. Default 2000. */
  refreshMs?: number;
  /** Records on one page of the list. Default 50. */
  pageSize?: number;
  /** Told about each request that failed unexpectedly (a bug, not the store being down). */
  onError?: (error: unknown) => void;
}

/** A standard fetch handler: mount it in any framework that speaks Request and Response. */
export type ConsoleHandler = (request: Request) => Promise<Response>;

const ASSETS: Record<string, { type: string; file: string }> = {
  "/assets/console.js": { type: "text/javascript; charset=utf-8", file: "console.js" },
  "/assets/console.css": { type: "text/css; charset=utf-8", file: "console.css" },
};

/** No inline script or style, no other origin, no framing: a record's content cannot run in the page. */
const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
  "cache-control": "no-store",
};

const MAX_FORM_BYTES = 2 * 1024 * 1024;
const MIN_TOKEN_LENGTH = 16;

/**
 * The console: counts by state and tool, records by state, tool and age (SCAN, with a cursor), one record
 * with every field, and, with writes allowed, resolving an `unknown` record with who and why, fenced as
 * `once resolve` is. Returns a fetch handler; the console keeps no state of its own beyond the store.
 */
export function createConsole(options: ConsoleOptions): ConsoleHandler {
  const store = storeOf(options);
  const base = normalizeBase(options.basePath);
  const refreshMs = options.refreshMs ?? 2_000;
  const pageSize = options.pageSize ?? 50;
  const jaegerUrl = checkJaegerUrl(options.jaegerUrl);
  const { token, authorize } = options;
  const allowWrites = options.allowWrites === true;
  if (token !== undefined && token.length < MIN_TOKEN_LENGTH)
    throw new RangeError(`the console's token must be ${MIN_TOKEN_LENGTH} characters or more`);
  if (allowWrites && token === undefined && authorize === undefined)
    throw new RangeError(
      "allowWrites needs a token or an authorize hook: resolving must not be open to anyone",
    );
  const assets = new Map<string, Promise<string>>();

  function asset(file: string): Promise<string> {
    let text = assets.get(file);
    if (text === undefined) {
      text = Promise.resolve(readFileSync(new URL(`./assets/${file}`, import.meta.url), "utf8"));
      assets.set(file, text);
    }
    return text;
  }

  return async function handle(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const path = routePath(url.pathname, base);
    try {
      const assetFile = ASSETS[path];
      if (assetFile !== undefined && request.method === "GET") {
        return new Response(await asset(assetFile.file), {
          headers: {
            "content-type": assetFile.type,
            "cache-control": "no-cache",
            "x-content-type-options": "nosniff",
          },
        });
      }
      const seen = authorize === undefined ? true : await authorize(request, "read");
      if (seen === false)
        return plain(403, "Forbidden: the host app does not let this request see the console.");

      const cookies: CookieSettings = { path: base === "" ? "/" : base, secure: isHttps(request, url) };
      const setCookies: string[] = [];
      let csrf = cookiesOf(request).get(CSRF_COOKIE);
      if (csrf === undefined || !/^[A-Za-z0-9_-]{43}$/.test(csrf)) {
        csrf = newCsrfToken();
        setCookies.push(setCookie(CSRF_COOKIE, csrf, cookies));
      }
      const ctx: PageContext = {
        base,
        storeLabel: store.label,
        refreshMs,
        jaegerUrl,
        commandOptions: options.commandOptions,
        csrf,
        writes: await writeAccess(request, typeof seen === "object" ? seen : undefined),
      };
      const live = url.searchParams.get("live") === "1";
      const respond = (status: number, body: Html, headers: Record<string, string> = {}) =>
        finish(
          new Response(body.text, {
            status,
            headers: { "content-type": "text/html; charset=utf-8", ...headers },
          }),
        );
      const page = (status: number, title: string, body: Html, banner?: Html) =>
        respond(status, layout(ctx, { title, body, ...(banner === undefined ? {} : { banner }) }));
      const finish = (response: Response) => {
        for (const [name, value] of Object.entries(SECURITY_HEADERS)) response.headers.set(name, value);
        for (const cookie of setCookies) response.headers.append("set-cookie", cookie);
        return response;
      };
      const redirect = (location: string) =>
        finish(new Response(null, { status: 303, headers: { location } }));
      /** Runs a read of the store; while it does not answer, the page (or its live part) says so. */
      const reading = async (
        title: string,
        read: () => Promise<Html>,
        wrap: (live: Html) => Html,
      ): Promise<Response> => {
        try {
          const part = await read();
          return live ? respond(200, part) : page(200, title, wrap(part));
        } catch (error) {
          if (!(error instanceof StoreUnavailableError)) throw error;
          const reason = unavailableReason(error);
          if (live)
            return respond(503, unreachableBanner(ctx, reason, true), { "x-once-store": "unreachable" });
          return page(503, title, wrap(emptyLive()), unreachableBanner(ctx, reason, false));
        }
      };

      if (request.method === "GET" && (path === "/" || path === "")) {
        return await reading(
          "Overview",
          async () => overviewLive(ctx, await store.count()),
          (part) => overviewBody(ctx, part),
        );
      }
      if (request.method === "GET" && path === "/records") {
        const parsed = listQuery(url.searchParams);
        if (typeof parsed === "string")
          return page(400, "Records", listBody(ctx, emptyQuery(), emptyLive(), parsed));
        return await reading(
          "Records",
          async () => {
            const records = await store.list({
              ...parsed,
              limit: pageSize,
              maxExamined: pageSize * 100,
            });
            return listLive(ctx, parsed, records);
          },
          (part) => listBody(ctx, parsed, part),
        );
      }
      const recordMatch = /^\/records\/([^/]+)(\/resolve)?$/.exec(path);
      if (recordMatch !== null) {
        const key = decodeURIComponent(recordMatch[1] ?? "").toLowerCase();
        if (!isKey(key))
          return page(
            404,
            "No such record",
            messageBody("No such record", "That is not a key: expected 64 hex characters.", {
              href: `${base}/records`,
              label: "all records",
            }),
          );
        if (recordMatch[2] === undefined && request.method === "GET") {
          const flash = flashOf(url.searchParams.get("resolved"));
          let read: { record: OnceRecord | undefined; now: number } | undefined;
          return await reading(
            `Record ${key.slice(0, 12)}…`,
            async () => {
              read = { record: await store.get(key), now: await store.now() };
              return recordLive(ctx, key, read.record, read.now);
            },
            // The full page also carries the resolve form, which needs the record itself.
            (part) =>
              recordBody(
                ctx,
                { key, record: read?.record, now: read?.now ?? 0, ...(flash ? { flash } : {}) },
                part,
              ),
          );
        }
        if (recordMatch[2] !== undefined && request.method === "POST") return await resolve(key);
      }
      if (path === "/login" && token !== undefined && allowWrites) {
        if (request.method === "GET")
          return page(200, "Log in", loginBody(ctx, safeNext(url.searchParams.get("next"))));
        if (request.method === "POST") {
          const form = await formOf(request);
          if (form === undefined)
            return page(413, "Too large", messageBody("Too large", "The form is too large."));
          const problem = csrfProblem(request, form.get("csrf"));
          if (problem !== undefined)
            return page(
              403,
              "Refused",
              messageBody("Refused", `Not logged in: ${problem}. Reload the page and try again.`),
            );
          const next = safeNext(form.get("next"));
          if (!sameSecret(form.get("token") ?? "", token))
            return page(401, "Log in", loginBody(ctx, next, "That is not the console's token."));
          setCookies.push(setCookie(SESSION_COOKIE, sessionFor(token), cookies, SESSION_MAX_AGE_S));
          return redirect(next);
        }
      }
      if (path === "/logout" && request.method === "POST") {
        const form = await formOf(request);
        if (form !== undefined && csrfProblem(request, form.get("csrf")) === undefined)
          setCookies.push(setCookie(SESSION_COOKIE, "", cookies, 0));
        return redirect(`${base}/`);
      }
      return page(
        404,
        "Not found",
        messageBody("Not found", "The console has no such page.", { href: `${base}/`, label: "overview" }),
      );

      async function resolve(key: string): Promise<Response> {
        const back = { href: `${base}/records/${key}`, label: "back to the record" };
        const refuse = (status: number, text: string) =>
          page(status, "Not resolved", messageBody("Not resolved", `${text} Nothing changed.`, back));
        if (!allowWrites)
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
            ? refuse(401, "Resolving needs the console's token: log in first.")
            : refuse(403, "The host app does not let this request resolve records.");
        }
        const entered: ResolveForm = {};
        for (const name of ["as", "result", "error", "code", "by", "why"] as const) {
          const value = form.get(name);
          if (value !== null) entered[name] = value;
        }
        const decision = decisionOf(entered);
        const by = ctx.writes.user ?? entered.by?.trim() ?? "";
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
            const record = await store.get(key);
            const view: RecordView = {
              key,
              record,
              now: await store.now(),
              form: entered,
              flash: { kind: "problem", text: `Not resolved: ${problem}` },
            };
            return page(400, "Not resolved", recordBody(ctx, view, recordLive(ctx, key, record, view.now)));
          }
          const outcome = await store.resolve(key, { decision, by, why, expectFence: fence });
          if (outcome.outcome === "resolved")
            return redirect(`${base}/records/${key}?resolved=${decision.as}`);
          const now = await store.now();
          const view: RecordView = {
            key,
            record: outcome.record,
            now,
            form: entered,
            flash: { kind: "refused", text: `Refused: ${outcome.reason}. Nothing changed.` },
          };
          return page(409, "Refused", recordBody(ctx, view, recordLive(ctx, key, outcome.record, now)));
        } catch (error) {
          if (!(error instanceof StoreUnavailableError)) throw error;
          return page(
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
    } catch (error) {
      options.onError?.(error);
      return plain(500, "The console failed on this request; the host app's log has the error.");
    }
  };

  async function writeAccess(request: Request, seen: { user: string } | undefined): Promise<WriteAccess> {
    if (!allowWrites) return { can: false, why: "read-only" };
    const loggedInWithToken = token !== undefined && hasToken(request, token);
    if (token !== undefined && !loggedInWithToken) return { can: false, why: "login" };
    if (authorize === undefined) return { can: true, loggedInWithToken };
    const verdict = await authorize(request, "resolve");
    if (verdict === false) return { can: false, why: "forbidden" };
    const user = typeof verdict === "object" ? verdict.user : seen?.user;
    return { can: true, loggedInWithToken, ...(user === undefined ? {} : { user }) };
  }

  function safeNext(next: string | null): string {
    const fallback = `${base}/`;
    if (next === null || !next.startsWith(`${base}/`) || next.startsWith("//") || next.includes("\\"))
      return fallback;
    return next;
  }
}

function storeOf(options: ConsoleOptions): OperatorStore {
  if (options.store !== undefined) return options.store;
  if (options.redis !== undefined)
    return new RedisOperatorStore({
      redis: options.redis,
      ...(options.prefix === undefined ? {} : { prefix: options.prefix }),
    });
  throw new TypeError("createConsole needs a store, or a redis client and its prefix");
}

function normalizeBase(basePath: string | undefined): string {
  if (basePath === undefined || basePath === "" || basePath === "/") return "";
  if (!/^\/[A-Za-z0-9._~/-]*$/.test(basePath))
    throw new RangeError(`basePath ${JSON.stringify(basePath)} must be a path like /once`);
  return basePath.replace(/\/+$/, "");
}

/**
 * The path within the console. A host that strips the mount path (Express's `app.use`, Hono's `mount`)
 * hands the rest; one that does not hands it whole. Both work.
 */
function routePath(pathname: string, base: string): string {
  if (base !== "" && (pathname === base || pathname.startsWith(`${base}/`)))
    return pathname.slice(base.length) || "/";
  return pathname;
}

function checkJaegerUrl(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  const parsed = new URL(url);
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw new RangeError(`jaegerUrl ${JSON.stringify(url)} must be an http(s) URL`);
  parsed.username = "";
  parsed.password = "";
  return parsed.toString().replace(/\/+$/, "");
}

function isHttps(request: Request, url: URL): boolean {
  return url.protocol === "https:" || request.headers.get("x-forwarded-proto") === "https";
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

function emptyQuery(): ListQuery {
  return { states: [], tools: [] };
}

function emptyLive(): Html {
  return raw("");
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

/** Why the store did not answer, in words fit for a page: the cause's message, never a URL's password. */
function unavailableReason(error: StoreUnavailableError): string {
  const cause = error.cause instanceof Error ? error.cause.message : error.message;
  return cause.replace(/\/\/[^@/\s]*@/g, "//");
}

async function formOf(request: Request): Promise<URLSearchParams | undefined> {
  const length = Number(request.headers.get("content-length") ?? "0");
  if (length > MAX_FORM_BYTES) return undefined;
  const text = await request.text();
  if (text.length > MAX_FORM_BYTES) return undefined;
  return new URLSearchParams(text);
}

function plain(status: number, text: string): Response {
  return new Response(`${text}\n`, {
    status,
    headers: { "content-type": "text/plain; charset=utf-8", ...SECURITY_HEADERS },
  });
}
