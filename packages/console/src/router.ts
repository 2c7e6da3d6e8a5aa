// The console's pages as a table: a method and a path pattern, each mapped to its handler. A pattern is the
// path within the console, with `:name` standing for one path segment (`/records/:key/resolve`).

export type Method = "GET" | "POST";

export interface Route<Call> {
  method: Method;
  path: string;
  handle: (call: Call, params: Readonly<Record<string, string>>) => Promise<Response>;
}

/** A request's route and the values of the pattern's `:name` segments, decoded. */
export interface RouteMatch<Call> {
  handle: Route<Call>["handle"];
  params: Readonly<Record<string, string>>;
}

/** A function from a request's method and path to its route, or undefined when the table has none. */
export type Router<Call> = (method: string, path: string) => RouteMatch<Call> | undefined;

/** The table, checked once: two routes for one method and pattern would leave one of them unreachable. */
export function routerOf<Call>(routes: readonly Route<Call>[]): Router<Call> {
  const compiled = routes.map((route) => ({ ...route, segments: route.path.split("/") }));
  const seen = new Set<string>();
  for (const { method, path } of routes) {
    const shape = `${method} ${path.replace(/:[^/]+/g, ":")}`;
    if (seen.has(shape)) throw new Error(`two routes for ${method} ${path}`);
    seen.add(shape);
  }
  return (method, path) => {
    const segments = path.split("/");
    for (const route of compiled) {
      if (route.method !== method || route.segments.length !== segments.length) continue;
      const params = paramsOf(route.segments, segments);
      if (params !== undefined) return { handle: route.handle, params };
    }
    return undefined;
  };
}

function paramsOf(
  pattern: readonly string[],
  segments: readonly string[],
): Record<string, string> | undefined {
  const params: Record<string, string> = {};
  for (const [i, part] of pattern.entries()) {
    const segment = segments[i] ?? "";
    if (!part.startsWith(":")) {
      if (part !== segment) return undefined;
      continue;
    }
    if (segment === "") return undefined;
    try {
      params[part.slice(1)] = decodeURIComponent(segment);
    } catch {
      // A broken escape (`%E0%A4%A`) names nothing: no page, not a failure.
      return undefined;
    }
  }
  return params;
}
