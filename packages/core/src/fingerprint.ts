import { createHash } from "node:crypto";
import { NotJsonError } from "./errors.js";

/**
 * RFC 8785 (JCS) canonical JSON: object keys sorted by UTF-16 code units, no whitespace, numbers in
 * ECMAScript's shortest form. Throws {@link NotJsonError} for anything JSON cannot carry.
 */
export function canonicalJson(value: unknown): string {
  return encode(value, "$", new Set());
}

function encode(value: unknown, path: string, seen: Set<object>): string {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new NotJsonError(path, `${value} is not a finite number`);
      return JSON.stringify(value);
    case "object": {
      if (value === null) return "null";
      if (seen.has(value)) throw new NotJsonError(path, "circular reference");
      seen.add(value);
      try {
        if (Array.isArray(value)) {
          return `[${value.map((item, i) => encode(item, `${path}[${i}]`, seen)).join(",")}]`;
        }
        const proto = Object.getPrototypeOf(value);
        if (proto !== Object.prototype && proto !== null) {
          throw new NotJsonError(path, `${proto?.constructor?.name ?? "object"} is not a plain object`);
        }
        const entries = Object.keys(value)
          .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
          .sort()
          .map(
            (k) =>
              `${JSON.stringify(k)}:${encode((value as Record<string, unknown>)[k], `${path}.${k}`, seen)}`,
          );
        return `{${entries.join(",")}}`;
      } finally {
        seen.delete(value);
      }
    }
    default:
      throw new NotJsonError(path, `${typeof value} is not JSON`);
  }
}

/** sha256 (hex) of the canonical JSON of `{ tool, input }`: binds a key to exactly one call. */
export function fingerprint(tool: string, input: unknown): string {
  return createHash("sha256").update(canonicalJson({ tool, input })).digest("hex");
}
