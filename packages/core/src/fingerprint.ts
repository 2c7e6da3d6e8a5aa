import { hash } from "node:crypto";
import { NotJsonError } from "./errors.js";

/**
 * RFC 8785 (JCS) canonical JSON: object keys sorted by UTF-16 code units, no whitespace, numbers in
 * ECMAScript's shortest form. Throws {@link NotJsonError} for anything JSON cannot carry.
 */
export function canonicalJson(value: unknown): string {
  return encode(value, [], new Set());
}

/**
 * `at` is the path to `value` as keys and indexes, pushed and popped on the way down: the text of a path is
 * only written for an error (most calls have none, and every call walks every key).
 */
function encode(value: unknown, at: (string | number)[], seen: Set<object>): string {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new NotJsonError(pathOf(at), `${value} is not a finite number`);
      return JSON.stringify(value);
    case "object": {
      if (value === null) return "null";
      if (seen.has(value)) throw new NotJsonError(pathOf(at), "circular reference");
      seen.add(value);
      try {
        if (Array.isArray(value)) {
          let out = "[";
          for (let i = 0; i < value.length; i++) {
            at.push(i);
            out += `${i === 0 ? "" : ","}${encode(value[i], at, seen)}`;
            at.pop();
          }
          return `${out}]`;
        }
        const proto = Object.getPrototypeOf(value);
        if (proto !== Object.prototype && proto !== null) {
          throw new NotJsonError(pathOf(at), `${proto?.constructor?.name ?? "object"} is not a plain object`);
        }
        const record = value as Record<string, unknown>;
        let out = "{";
        for (const k of Object.keys(record).sort()) {
          const item = record[k];
          if (item === undefined) continue;
          at.push(k);
          out += `${out.length === 1 ? "" : ","}${JSON.stringify(k)}:${encode(item, at, seen)}`;
          at.pop();
        }
        return `${out}}`;
      } finally {
        seen.delete(value);
      }
    }
    default:
      throw new NotJsonError(pathOf(at), `${typeof value} is not JSON`);
  }
}

/** `$`, `$.a`, `$.a[0]`: the path of a value, for the error that names it. */
function pathOf(at: readonly (string | number)[]): string {
  return at.reduce<string>(
    (path, part) => (typeof part === "number" ? `${path}[${part}]` : `${path}.${part}`),
    "$",
  );
}

/** sha256 (hex) of the canonical JSON of `{ tool, input }`: binds a key to exactly one call. */
export function fingerprint(tool: string, input: unknown): string {
  return hash("sha256", canonicalJson({ tool, input }));
}
