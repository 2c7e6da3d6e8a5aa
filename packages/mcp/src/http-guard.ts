import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { BlockList, isIPv6 } from "node:net";
import type { StreamableHTTPServerTransportOptions } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

// Who may reach an MCP server over HTTP. The SDK's transport checks Host and Origin only when asked, each by
// exact string (Host with its port); it has no authentication. This guard runs before the transport: Host by
// name on any port, Origin against a list, a bearer token; and it hands the transport the same Origin list,
// so the SDK's own check is on too.

export interface McpHttpGuardOptions {
  /** The address the server listens on. Not a loopback one (127.0.0.0/8, ::1, localhost): a token is required. */
  host: string;
  /**
   * The names (no port) a request's `Host` may carry, on any port. Default: loopback names only (localhost,
   * 127.0.0.0/8, [::1]) when `host` is a loopback address; any name otherwise, where the token stands guard.
   */
  allowedHosts?: readonly string[];
  /**
   * The origins (`https://agent.example.com`) a request's `Origin` may be, compared exactly as a browser
   * sends it. Default: this server's own loopback origins — http or https, localhost, 127.0.0.1, [::1] or a
   * loopback `host`, on the port the request came in on. A request without `Origin` (not from a browser) is
   * not checked.
   */
  allowedOrigins?: readonly string[];
  /**
   * The bearer token every request must carry (`Authorization: Bearer <token>`): 16 characters or more.
   * `undefined`: none, which only a loopback `host` (or `insecureNoAuth`) allows.
   */
  token?: string | undefined;
  /** Serve a `host` that is not loopback with no token: anyone who can reach the port can call every tool. */
  insecureNoAuth?: boolean;
}

/** Why a request was refused, ready to send: nothing of it may reach the MCP server. */
export interface McpHttpRefusal {
  readonly status: 401 | 403;
  /** In words, naming the refused Host or Origin; never a token. */
  readonly message: string;
  readonly headers: Readonly<Record<string, string>>;
  /** A JSON-RPC error, as the SDK's transport answers what it refuses. */
  readonly body: string;
}

/** The request as the guard reads it: a Node `IncomingMessage` (Express's `req` is one). */
export type McpHttpRequest = Pick<IncomingMessage, "headers" | "socket">;

const MIN_TOKEN_LENGTH = 16;
/** The loopback names a loopback server answers by default, as `URL#hostname` spells them. */
const LOOPBACK_NAMES = ["localhost", "127.0.0.1", "[::1]"];

const loopbackAddresses = new BlockList();
loopbackAddresses.addSubnet("127.0.0.0", 8, "ipv4");
loopbackAddresses.addAddress("::1", "ipv6");

/** True for `localhost`, an address in 127.0.0.0/8 and `::1` (bracketed or not, IPv4-mapped too). */
export function isLoopbackHost(host: string): boolean {
  const name = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  if (name.toLowerCase() === "localhost") return true;
  try {
    return loopbackAddresses.check(name, isIPv6(name) ? "ipv6" : "ipv4");
  } catch {
    return false; // not an address: a name other than localhost
  }
}

/**
 * The checks an MCP server over HTTP makes before anything of a request runs: `refusal(req)` says why a
 * request is refused (answer it, run nothing) or `undefined`; `transportOptions(req)` turns on the SDK
 * transport's own DNS-rebinding protection with the same origins. Throws at construction on options that
 * would leave a non-loopback server open or cannot be met, naming the problem.
 */
export class McpHttpGuard {
  /** The address the server listens on. */
  readonly host: string;
  /** The Host names answered; "loopback": every loopback name; undefined: any name. */
  readonly #allowedHosts: ReadonlySet<string> | "loopback" | undefined;
  readonly #allowedOrigins: readonly string[] | undefined;
  readonly #tokenDigest: Buffer | undefined;
  /** True when a request needs no token although the server listens beyond loopback. */
  readonly unauthenticated: boolean;

  constructor(options: McpHttpGuardOptions) {
    const { host, token } = options;
    const loopback = isLoopbackHost(host);
    if (token !== undefined && options.insecureNoAuth === true)
      throw new RangeError("give a token or insecureNoAuth, not both");
    if (!loopback && token === undefined && options.insecureNoAuth !== true)
      throw new RangeError(
        `host ${host} is not a loopback address, so anyone who can reach the port could call the tools: ` +
          "give a token (every request then sends Authorization: Bearer <token>), or insecureNoAuth to serve it with none",
      );
    if (token !== undefined) checkToken(token);
    this.host = host;
    this.unauthenticated = !loopback && token === undefined;
    this.#tokenDigest = token === undefined ? undefined : digest(token);
    this.#allowedHosts =
      options.allowedHosts !== undefined
        ? new Set(options.allowedHosts.map(hostEntry))
        : loopback
          ? "loopback"
          : undefined;
    this.#allowedOrigins = options.allowedOrigins?.map(originEntry);
  }

  /** Why this request must not be served (the first check it fails: Host, Origin, token), or `undefined`. */
  refusal(req: McpHttpRequest): McpHttpRefusal | undefined {
    const hostProblem = this.#hostProblem(req.headers.host);
    if (hostProblem !== undefined) return refusal(403, hostProblem);
    const origin = req.headers.origin;
    if (origin !== undefined && !this.#originsFor(req).includes(origin))
      return refusal(403, `origin ${origin} refused: not an origin this server answers`);
    if (this.#tokenDigest !== undefined) {
      const sent = /^Bearer +(\S+) *$/i.exec(req.headers.authorization ?? "")?.[1];
      if (sent === undefined)
        return refusal(401, "a bearer token is required: send Authorization: Bearer <token>", {
          "WWW-Authenticate": "Bearer",
        });
      // Digests of equal length, so neither the token nor its length leaks through the time taken.
      if (!timingSafeEqual(digest(sent), this.#tokenDigest))
        return refusal(401, "the bearer token is not this server's", {
          "WWW-Authenticate": 'Bearer error="invalid_token"',
        });
    }
    return undefined;
  }

  /**
   * The SDK transport's DNS-rebinding protection, on, with the origins `refusal` allows for this request: a
   * second check of Origin inside the transport. Not Host: the SDK compares `Host` with its port, which a
   * forwarded port (ssh -L, a proxy) changes; `refusal` checks the name, as the SDK's own
   * `hostHeaderValidation` middleware does.
   */
  transportOptions(
    req: McpHttpRequest,
  ): Pick<StreamableHTTPServerTransportOptions, "enableDnsRebindingProtection" | "allowedOrigins"> {
    return { enableDnsRebindingProtection: true, allowedOrigins: [...this.#originsFor(req)] };
  }

  #hostProblem(header: string | undefined): string | undefined {
    if (this.#allowedHosts === undefined) return undefined;
    if (header === undefined || header === "") return "a Host header is required";
    let url: URL | undefined;
    try {
      url = new URL(`http://${header}`);
    } catch {
      url = undefined;
    }
    // Only host[:port]: "127.0.0.1@evil.example" or "evil.example/x" must not read as another name.
    if (url === undefined || url.href !== `http://${url.host}/`)
      return `host ${JSON.stringify(header)} refused: not a host name`;
    const name = url.hostname;
    // A name that is a loopback address cannot be rebound: only a name like evil.example can.
    if (this.#allowedHosts === "loopback" ? isLoopbackHost(name) : this.#allowedHosts.has(name))
      return undefined;
    return `host ${name} refused: not a name this server answers`;
  }

  #originsFor(req: McpHttpRequest): readonly string[] {
    if (this.#allowedOrigins !== undefined) return this.#allowedOrigins;
    const port = req.socket.localPort;
    const names = new Set(LOOPBACK_NAMES);
    if (isLoopbackHost(this.host)) names.add(isIPv6(this.host) ? `[${this.host}]` : this.host);
    return ["http", "https"].flatMap((scheme) =>
      [...names].map((name) => new URL(`${scheme}://${name}${port === undefined ? "" : `:${port}`}`).origin),
    );
  }
}

function checkToken(token: string): void {
  // Never the token itself in a message: it may end up in a log.
  if (token.length < MIN_TOKEN_LENGTH)
    throw new RangeError(`the bearer token must be ${MIN_TOKEN_LENGTH} characters or more`);
  if (!/^[\x21-\x7e]+$/.test(token))
    throw new RangeError("the bearer token must be printable ASCII with no spaces, as a header carries it");
}

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/** An `allowedHosts` entry as `URL#hostname` spells it (lower case, IPv6 in brackets), or a RangeError. */
function hostEntry(entry: string): string {
  let url: URL | undefined;
  try {
    url = new URL(`http://${isIPv6(entry) ? `[${entry}]` : entry}`);
  } catch {
    url = undefined;
  }
  if (url === undefined || url.host !== url.hostname || url.pathname !== "/" || url.username !== "")
    throw new RangeError(
      `allowedHosts: ${JSON.stringify(entry)} is not a host name (give it without a port)`,
    );
  return url.hostname;
}

/** An `allowedOrigins` entry as a browser sends it (`https://a.example`, no default port), or a RangeError. */
function originEntry(entry: string): string {
  let url: URL | undefined;
  try {
    url = new URL(entry);
  } catch {
    url = undefined;
  }
  if (
    url === undefined ||
    (url.protocol !== "http:" && url.protocol !== "https:") ||
    url.pathname !== "/" ||
    url.search !== "" ||
    url.hash !== "" ||
    url.username !== "" ||
    url.password !== ""
  )
    throw new RangeError(
      `allowedOrigins: ${JSON.stringify(entry)} is not an origin like https://agent.example`,
    );
  return url.origin;
}

function refusal(status: 401 | 403, message: string, headers: Record<string, string> = {}): McpHttpRefusal {
  return {
    status,
    message,
    headers: { ...headers, "Content-Type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }),
  };
}
