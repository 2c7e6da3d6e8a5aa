// The console's options that need no store, checked in one place: by `createConsole`, and by `once console`
// before it opens a store (through `@once/console/internal`), which names its own flags in the message. Each
// check throws a RangeError that names the option and the problem.

/** The shortest token the console takes: a person types it once, a guesser must not find it. */
const MIN_TOKEN_LENGTH = 16;

/** The token a person logs in with, as it is, or a RangeError when it is too short to be a secret. */
export function checkToken(token: string): string {
  if (token.length < MIN_TOKEN_LENGTH)
    throw new RangeError(`the console's token must be ${MIN_TOKEN_LENGTH} characters or more`);
  return token;
}

/**
 * Jaeger's UI as the pages link to it: an http(s) URL, without a user or password (the link is in every
 * page) and without a trailing slash; anything else a RangeError naming `option`.
 */
export function checkJaegerUrl(url: string, option = "jaegerUrl"): string {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || (parsed.protocol !== "http:" && parsed.protocol !== "https:"))
    throw new RangeError(`${option} ${JSON.stringify(url)} must be an http:// or https:// URL`);
  parsed.username = "";
  parsed.password = "";
  return parsed.toString().replace(/\/+$/, "");
}

/** Where the console is mounted, as its links start: "" for the root, else `/once` without a trailing slash. */
export function checkBasePath(basePath: string | undefined): string {
  if (basePath === undefined || basePath === "" || basePath === "/") return "";
  if (!/^\/[A-Za-z0-9._~/-]*$/.test(basePath))
    throw new RangeError(`basePath ${JSON.stringify(basePath)} must be a path like /once`);
  return basePath.replace(/\/+$/, "");
}
