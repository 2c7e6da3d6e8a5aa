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

  it("changes on any value change", () => {
    fc.assert(
      fc.property(json, json, (a, b) => {
        const equal = canonicalJson(a) === canonicalJson(b);
        expect(fingerprint("t", a) === fingerprint("t", b)).toBe(equal);
      }),
    );
    expect(fingerprint("charge", { amount: 100 })).not.toBe(fingerprint("charge", { amount: 101 }));
    expect(fingerprint("charge", { amount: 100 })).not.toBe(fingerprint("refund", { amount: 100 }));
  });
});
