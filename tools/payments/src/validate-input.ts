import type { EffectKind, EffectRecords } from "./types.js";

/** An accepted body: the record minus what the provider assigns. `metadata` is always present. */
export type AcceptedInput<K extends EffectKind> = Omit<EffectRecords[K], "id" | "createdAt">;

export type Validation<T> = { ok: true; value: T } | { ok: false; error: string };

type FieldRule = "text" | "optional-text" | "email-address" | "amount" | "currency" | "metadata";

// Field order here is the order of the accepted object, which makes its JSON a stable fingerprint.
const FIELDS: { [K in EffectKind]: Record<string, FieldRule> } = {
  charges: { amount: "amount", currency: "currency", orderId: "text", metadata: "metadata" },
  emails: {
    to: "email-address",
    subject: "text",
    body: "optional-text",
    orderId: "text",
    metadata: "metadata",
  },
  tickets: { orderId: "text", subject: "text", metadata: "metadata" },
};

/** Checks a parsed JSON body for `kind`; the error names the first offending field. */
export function validateInput<K extends EffectKind>(kind: K, raw: unknown): Validation<AcceptedInput<K>> {
  if (!isPlainObject(raw)) return { ok: false, error: "body must be a JSON object" };
  const rules = FIELDS[kind];
  // Unknown fields are refused, like real providers do, so a typo (`orderID`) fails loudly instead of
  // silently creating a charge without an order.
  for (const name of Object.keys(raw)) {
    if (!(name in rules))
      return { ok: false, error: `unknown field '${name}' (allowed: ${Object.keys(rules).join(", ")})` };
  }
  const value: Record<string, unknown> = {};
  for (const [name, rule] of Object.entries(rules)) {
    const error = checkField(name, rule, raw[name]);
    if (error !== undefined) return { ok: false, error };
    if (rule === "metadata") value[name] = { ...((raw[name] as Record<string, string> | undefined) ?? {}) };
    else if (raw[name] !== undefined) value[name] = raw[name];
  }
  return { ok: true, value: value as AcceptedInput<K> };
}

function checkField(name: string, rule: FieldRule, value: unknown): string | undefined {
  const got = `, got ${describe(value)}`;
  switch (rule) {
    case "text":
      return typeof value === "string" && value.length > 0
        ? undefined
        : `${name} must be a non-empty string${got}`;
    case "optional-text":
      return value === undefined || typeof value === "string" ? undefined : `${name} must be a string${got}`;
    case "email-address":
      return typeof value === "string" && /^[^@\s]+@[^@\s]+$/.test(value)
        ? undefined
        : `${name} must be an email address${got}`;
    case "amount":
      return Number.isSafeInteger(value) && (value as number) > 0
        ? undefined
        : `${name} must be a positive integer number of cents${got}`;
    case "currency":
      return typeof value === "string" && /^[A-Za-z]{3}$/.test(value)
        ? undefined
        : `${name} must be a 3-letter ISO 4217 code such as "usd"${got}`;
    case "metadata": {
      if (value === undefined) return undefined;
      if (!isPlainObject(value)) return `${name} must be an object of string values${got}`;
      const bad = Object.entries(value).find(([, v]) => typeof v !== "string");
      return bad === undefined ? undefined : `${name}.${bad[0]} must be a string, got ${describe(bad[1])}`;
    }
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === undefined) return "nothing";
  const json = JSON.stringify(value);
  return json.length > 40 ? `${json.slice(0, 40)}…` : json;
}
