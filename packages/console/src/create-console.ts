import { readFileSync } from "node:fs";
import type { OperatorStore } from "@once/core";
import { RedisOperatorStore } from "@once/redis";
import type { Cluster, Redis } from "ioredis";
import { allowedHostsOf, DEFAULT_ALLOWED_HOSTS, type HostPattern, refusedHost } from "./allowed-hosts.js";
import { type ConsoleApp, consoleRoutes, notFound, type PageCall } from "./pages.js";
import { plain, Reply } from "./reply.js";
import { routerOf } from "./router.js";
import { CSRF_COOKIE, cookiesOf, hasToken, newCsrfToken, setCookie } from "./security.js";
import { checkBasePath, checkJaegerUrl, checkToken } from "./settings.js";
import type { PageContext, WriteAccess } from "./views.js";

/** What the console asks the host app about: seeing the pages, or a write (resolve, approve / deny, cancel). */
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
  /**
   * The hosts the console answers to, as a browser sends them in Host: `"ops.example.com"` (any port),
   * `"ops.example.com:8443"`, `"10.0.0.5:4100"`, `"[::1]:4100"`. A request naming any other host, in Host or
   * in a proxy's X-Forwarded-Host or Forwarded, is refused (421) before anything else is done, so that a page
   * on another name rebound to this address cannot read the records. Default: the loopback names
   * (`localhost`, `127.0.0.1`, `[::1]`) on any port. Behind a proxy that passes the browser's host, list it.
   */
  allowedHosts?: readonly string[];
  /** Where the host app mounts the console, e.g. `/once`; every link starts with it. Default: the root. */
  basePath?: string;
  /**
   * Writes from the pages: resolving `unknown` records, approving or denying calls waiting for approval,
   * cancelling tasks. Default false: read-only. Needs `token` or `authorize`.
   */
  allowWrites?: boolean;
  /** The secret a person logs in with (or sends as `Authorization: Bearer`) to write; 16 characters or more. */
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

/** The script and stylesheet: served before the authorize hook, since they hold nothing of the store. */
const ASSETS: Record<string, { type: string; file: string }> = {
  "/assets/console.js": { type: "text/javascript; charset=utf-8", file: "console.js" },
  "/assets/console.css": { type: "text/css; charset=utf-8", file: "console.css" },
};

/**
 * The console: counts by state and tool, records by state, tool and age (SCAN, with a cursor), one record
 * with every field, and, with writes allowed, resolving an `unknown` record with who and why, fenced as
 * `once resolve` is. Returns a fetch handler; the console keeps no state of its own beyond the store.
 */
export function createConsole(options: ConsoleOptions): ConsoleHandler {
  const { authorize } = options;
  const allowWrites = options.allowWrites === true;
  const token = options.token === undefined ? undefined : checkToken(options.token);
  if (allowWrites && token === undefined && authorize === undefined)
    throw new RangeError(
      "allowWrites needs a token or an authorize hook: resolving must not be open to anyone",
    );
  const allowedHosts =
    options.allowedHosts === undefined ? DEFAULT_ALLOWED_HOSTS : allowedHostsOf(options.allowedHosts);
  const jaegerUrl = options.jaegerUrl === undefined ? undefined : checkJaegerUrl(options.jaegerUrl);
  const app: ConsoleApp = {
    store: storeOf(options),
    base: checkBasePath(options.basePath),
    pageSize: options.pageSize ?? 50,
    allowWrites,
    token,
  };
  const { base, store } = app;
  const route = routerOf(consoleRoutes(app));
  const assets = new Map<string, string>();

  function asset(file: string): string {
    let text = assets.get(file);
    if (text === undefined) {
      text = readFileSync(new URL(`./assets/${file}`, import.meta.url), "utf8");
      assets.set(file, text);
    }
    return text;
  }

  return async function handle(request: Request): Promise<Response> {
    const misdirected = misdirectedResponse(request, allowedHosts);
    if (misdirected !== undefined) return misdirected;
    const url = new URL(request.url);
    const path = routePath(url.pathname, base);
    try {
      const assetFile = ASSETS[path];
      if (assetFile !== undefined && request.method === "GET") {
        return new Response(asset(assetFile.file), {
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

      const cookies = { path: base === "" ? "/" : base, secure: isHttps(request, url) };
      const sentCsrf = cookiesOf(request).get(CSRF_COOKIE);
      const csrf = sentCsrf !== undefined && /^[A-Za-z0-9_-]{43}$/.test(sentCsrf) ? sentCsrf : newCsrfToken();
      const ctx: PageContext = {
        base,
        storeLabel: store.label,
        refreshMs: options.refreshMs ?? 2_000,
        jaegerUrl,
        commandOptions: options.commandOptions,
        csrf,
        writes: await writeAccess(request, typeof seen === "object" ? seen : undefined),
      };
      const reply = new Reply(ctx, url.searchParams.get("live") === "1");
      if (csrf !== sentCsrf) reply.setCookie(setCookie(CSRF_COOKIE, csrf, cookies));
      const call: PageCall = { request, url, reply, cookies };
      const found = route(request.method, path);
      return found === undefined ? notFound(app, call) : await found.handle(call, found.params);
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
}

/** A 421 for a request naming a host the console does not answer to, saying which and how to allow it. */
function misdirectedResponse(request: Request, allowed: readonly HostPattern[]): Response | undefined {
  const refused = refusedHost(request, allowed);
  if (refused === undefined) return undefined;
  // The host is the request's own text: it goes into a text/plain body (nosniff), quoted and cut short.
  const host = refused.host.slice(0, 200);
  const how = refused.wellFormed
    ? `To reach it under this name, allow the name: once console --allowed-hosts ${host}, or ` +
      `createConsole({ allowedHosts: [${JSON.stringify(host)}] }) in a host app.`
    : "That is not a host name.";
  return plain(
    421,
    `Misdirected request: this console does not answer to the host ${JSON.stringify(host)} (${refused.header}). ` +
      "It answers only to the hosts it was started for, so that a page on another name pointed at this " +
      `address (DNS rebinding) cannot read it. ${how}`,
  );
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

/**
 * The path within the console. A host that strips the mount path (Express's `app.use`, Hono's `mount`)
 * hands the rest; one that does not hands it whole. Both work.
 */
function routePath(pathname: string, base: string): string {
  if (base !== "" && (pathname === base || pathname.startsWith(`${base}/`)))
    return pathname.slice(base.length) || "/";
  return pathname;
}

function isHttps(request: Request, url: URL): boolean {
  return url.protocol === "https:" || request.headers.get("x-forwarded-proto") === "https";
}
