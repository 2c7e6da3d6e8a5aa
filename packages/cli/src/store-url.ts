import { UsageError } from "./errors.js";

/** What a store's URL must look like: its schemes, and an example for the message when it does not. */
export interface StoreUrlKind {
  schemes: readonly string[];
  example: string;
}

export const REDIS_URL: StoreUrlKind = { schemes: ["redis:", "rediss:"], example: "redis://host:port" };
export const POSTGRES_URL: StoreUrlKind = {
  schemes: ["postgres:", "postgresql:"],
  example: "postgres://user@host:5432/database",
};

/**
 * A store's URL, checked, as messages show it: it must parse and use one of the kind's schemes, or it is a
 * UsageError naming `source`; the label has the password as `***`, and so has the error, so neither puts a
 * password into a terminal or a CI log.
 */
export function storeUrlLabel(url: string, source: string, kind: StoreUrlKind): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    const shown = url.replace(/(\/\/[^:/@]*:)[^@/]*@/, "$1***@");
    throw new UsageError(`${source} ${JSON.stringify(shown)} is not a URL: use ${kind.example}`);
  }
  if (parsed.password !== "") parsed.password = "***";
  if (!kind.schemes.includes(parsed.protocol))
    throw new UsageError(
      `${source} ${JSON.stringify(parsed.toString())} must start with ${kind.schemes.map((s) => `${s}//`).join(" or ")}`,
    );
  return parsed.toString();
}
