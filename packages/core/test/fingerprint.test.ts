import { isDeepStrictEqual } from "node:util";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalJson, fingerprint, NotJsonError } from "../src/index.js";

function shuffleKeys(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((v) => shuffleKeys(v, seed));
  if (value && typeof value === "object") {
    const entries = Object.entries(value);
    const rotated = entries
      .slice(seed % (entries.length || 1))
      .concat(entries.slice(0, seed % (entries.length || 1)));
    return Object.fromEntries(rotated.reverse().map(([k, v]) => [k, shuffleKeys(v, seed)]));
  }
  return value;
}

/** RFC 8785 writes -0 as 0: for deep equality, the two are the same number. */
function withoutNegativeZero(value: unknown): unknown {
  if (Object.is(value, -0)) return 0;
  if (Array.isArray(value)) return value.map(withoutNegativeZero);
  if (value && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withoutNegativeZero(v)]));
  return value;
}

/** `value` with one leaf (the `pick`-th, wrapping around) replaced by something it cannot equal. */
function changeOneLeaf(value: unknown, pick: number): unknown {
  const leaves: string[] = [];
  const walk = (v: unknown, path: string) => {
    // Arrays too: their entries are their indices.
    if (v && typeof v === "object") for (const [k, item] of Object.entries(v)) walk(item, `${path}/${k}`);
    else leaves.push(path);
  };
  walk(value, "");
  const target = leaves[pick % Math.max(1, leaves.length)] ?? "";
  const replace = (v: unknown, path: string): unknown => {
    if (path === target) return { changed: [v] };
    if (Array.isArray(v)) return v.map((item, i) => replace(item, `${path}/${i}`));
    if (v && typeof v === "object")
      return Object.fromEntries(Object.entries(v).map(([k, item]) => [k, replace(item, `${path}/${k}`)]));
    return v;
  };
  return replace(value, "");
}

const json = fc.jsonValue({ noUnicodeString: false }).filter((v) => !Object.is(v, -0));

describe("canonicalJson", () => {
  it("follows RFC 8785 for the sample in its appendix (numbers and key order)", () => {
    const value = {
      // biome-ignore lint/correctness/noPrecisionLoss: RFC 8785's own sample, rounding included.
      numbers: [333333333.33333329, 1e30, 4.5, 2e-3, 0.000000000000000000000000001],
      "\u20ac": "€",
      "\r": 1,
      "1": 2,
    };
    expect(canonicalJson(value)).toBe(
      '{"\\r":1,"1":2,"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"€":"€"}',
    );
  });

  it("rejects what JSON cannot carry, naming where", () => {
    expect(() => canonicalJson({ a: [1, Number.NaN] })).toThrow(NotJsonError);
    expect(() => canonicalJson({ a: [1, Number.NaN] })).toThrow(/\$\.a\[1\]/);
    expect(() => canonicalJson({ b: 10n })).toThrow(/bigint/);
    expect(() => canonicalJson(new Date())).toThrow(/Date is not a plain object/);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow(/circular/);
  });
});

describe("fingerprint", () => {
  it("ignores object key order", () => {
    fc.assert(
      fc.property(json, fc.nat(), (value, seed) => {
        expect(fingerprint("t", shuffleKeys(value, seed))).toBe(fingerprint("t", value));
      }),
    );
  });

  it("changes on any value change: equal fingerprints exactly when the values are deeply equal", () => {
    // Judged by node's deep equality (which ignores key order), not by canonicalJson: a canonicalisation that
    // mapped two different values to one string would fail here.
    fc.assert(
      fc.property(json, json, (a, b) => {
        const equal = isDeepStrictEqual(withoutNegativeZero(a), withoutNegativeZero(b));
        expect(fingerprint("t", a) === fingerprint("t", b)).toBe(equal);
      }),
    );
    // Independent values are rarely equal: also change one leaf of a value and compare with the original.
    fc.assert(
      fc.property(json, fc.nat(), (value, pick) => {
        const changed = changeOneLeaf(value, pick);
        expect(fingerprint("t", changed)).not.toBe(fingerprint("t", value));
      }),
    );
    expect(fingerprint("charge", { amount: 100 })).not.toBe(fingerprint("charge", { amount: 101 }));
    expect(fingerprint("charge", { amount: 100 })).not.toBe(fingerprint("refund", { amount: 100 }));
  });
});
