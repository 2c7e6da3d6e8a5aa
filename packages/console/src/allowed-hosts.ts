import os from "node:os";

// Which names the console answers to. Reads need no login, so without this check a page on a name the
// attacker controls, rebound to 127.0.0.1 (DNS rebinding), would be same-origin with the console and could
// read every stored result and error. The browser always sends the name of the page's own origin as Host, and
// a page's script cannot change it: refusing every name the console was not started for closes that door.

/** A name or address the console answers to, on one port or (port undefined) on any. */
export interface HostPattern {
  hostname: string;
  port: string | undefined;
}

/** The names of this machine itself, which no other site can be reached under. */
const LOOPBACK_HOSTNAMES = ["localhost", "127.0.0.1", "[::1]"] as const;

/**
 * What `createConsole` answers to when it is not told: the loopback names on any port. Mounted in a host app
 * the console does not know its address; this default keeps it closed to every other name, and the 421 says
 * how to allow one.
 */
export const DEFAULT_ALLOWED_HOSTS: readonly HostPattern[] = LOOPBACK_HOSTNAMES.map((hostname) => ({
  hostname,
  port: undefined,
}));

// A name (letters, digits, dots, hyphens, underscores), an IPv4 address or a bracketed IPv6 one, then perhaps
// a port: what a browser puts in Host. Nothing else (no scheme, path, user or space) is a host.
const HOST = /^(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(?::(\d{1,5}))?$/;

function parseHost(text: string): HostPattern | undefined {
  const found = HOST.exec(text.trim().toLowerCase());
  if (found === null) return undefined;
  return { hostname: found[1] ?? "", port: found[2] };
}

/** The `allowedHosts` option, checked: a RangeError naming the entry that is not a host. */
export function allowedHostsOf(entries: readonly string[], option = "allowedHosts"): HostPattern[] {
  if (entries.length === 0)
    throw new RangeError(`${option} lists no host: the console would refuse every request`);
  return entries.map((entry) => {
    const pattern = typeof entry === "string" ? parseHost(entry) : undefined;
    if (pattern === undefined)
      throw new RangeError(
        `${option}: ${JSON.stringify(entry)} is not a host: give a name or an address, with a port or ` +
          "without (ops.example.com for any port, ops.example.com:8443, 10.0.0.5:4100, [::1]:4100)",
      );
    return pattern;
  });
}

/**
 * The hosts a browser reaches a server listening on `address`:`port` under: for a loopback address the
 * loopback names, for a wildcard one (0.0.0.0, ::) those and this machine's own addresses, else the address
 * itself; always with the port. A name a proxy or DNS gives the machine is not among them: it must be listed.
 */
export function hostsServedAt(address: string, port: number): string[] {
  const withPort = (host: string) => `${host.includes(":") ? `[${host}]` : host}:${port}`;
  const loopback = LOOPBACK_HOSTNAMES.map((name) => `${name}:${port}`);
  const bound = address.toLowerCase().replace(/^\[(.*)\]$/, "$1");
  if (bound === "localhost" || bound === "::1" || /^127\.\d+\.\d+\.\d+$/.test(bound))
    return [...new Set([...loopback, withPort(bound)])];
  if (bound === "0.0.0.0" || bound === "::") {
    const own = Object.values(os.networkInterfaces())
      .flat()
      // A link-local IPv6 address needs its zone in a URL, which browsers do not take.
      .filter((nic) => nic !== undefined && nic.scopeid === undefined)
      .map((nic) => withPort(nic?.address ?? ""));
    return [...new Set([...loopback, withPort(bound), ...own])];
  }
  return [withPort(bound)];
}

/** Every host the request names: its Host header, its URL's (where a host app built it from Host), and any a proxy forwarded. */
function hostsClaimed(request: Request): { host: string; header: string }[] {
  const claimed: { host: string; header: string }[] = [];
  const host = request.headers.get("host");
  if (host !== null) claimed.push({ host, header: "Host" });
  // HTTP/2's :authority, or a fetch runtime that keeps Host out of the headers, is seen in the URL alone.
  claimed.push({ host: new URL(request.url).host, header: "the request's URL" });
  // A proxy that sets Host to its upstream's name passes the browser's in these. They are checked as Host is,
  // or a page rebound to the proxy's address would get in under the upstream's name; and a page's own script
  // may set X-Forwarded-Host, so a forwarded name never stands in for the real one, it only adds to the check.
  for (const value of (request.headers.get("x-forwarded-host") ?? "").split(","))
    if (value.trim() !== "") claimed.push({ host: value.trim(), header: "X-Forwarded-Host" });
  for (const match of (request.headers.get("forwarded") ?? "").matchAll(
    /(?:^|[;,\s])host=("[^"]*"|[^;,\s]*)/gi,
  ))
    claimed.push({ host: (match[1] ?? "").replace(/^"(.*)"$/, "$1"), header: "Forwarded" });
  return claimed;
}

/**
 * The first host the request names that the console does not answer to: the text, the header it came in, and
 * whether it is a host at all (a well-formed one could be allowed).
 */
export function refusedHost(
  request: Request,
  allowed: readonly HostPattern[],
): { host: string; header: string; wellFormed: boolean } | undefined {
  for (const { host, header } of hostsClaimed(request)) {
    const claimed = parseHost(host);
    const allowedHere =
      claimed !== undefined &&
      allowed.some(
        (pattern) =>
          pattern.hostname === claimed.hostname &&
          (pattern.port === undefined || pattern.port === claimed.port),
      );
    if (!allowedHere) return { host, header, wellFormed: claimed !== undefined };
  }
  return undefined;
}
