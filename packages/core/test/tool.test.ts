import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  defineTool,
  InvalidInputError,
  InvalidOutputError,
  InvalidToolError,
  parseInput,
  parseOutput,
} from "../src/index.js";
import { classifyWith, toStoredError } from "../src/internal.js";

const charge = defineTool({
  name: "charge_customer",
  kind: "effect",
  input: z.object({ orderId: z.string(), amount: z.number().int().positive() }),
  output: z.object({ chargeId: z.string() }),
  run: async (input, ctx) => ({ chargeId: `${input.orderId}-${ctx.fence}` }),
  classifyError: (err) => (err instanceof RangeError ? "terminal" : "unknown"),
});

describe("defineTool", () => {
  it("refuses malformed declarations at definition time", () => {
    const base = { kind: "read" as const, input: z.object({}), output: z.object({}), run: () => ({}) };
    expect(() => defineTool({ ...base, name: "1bad" })).toThrow(InvalidToolError);
    expect(() => defineTool({ ...base, name: "ok", kind: "other" as never })).toThrow(/kind must be one of/);
    expect(() => defineTool({ ...base, name: "ok", input: {} as never })).toThrow(/zod schemas/);
    expect(() =>
      defineTool({ ...base, name: "ok", reconcile: async () => ({ applied: false }) } as never),
    ).toThrow(/effect tools only/);
    expect(() => defineTool({ ...charge, leaseMs: 5 })).toThrow(/leaseMs/);
  });

  it("validates input and output with paths, not values", () => {
    expect(() => parseInput(charge, { orderId: "o", amount: -5 })).toThrow(InvalidInputError);
    let thrown: unknown;
    try {
      parseInput(charge, { orderId: "secret-order", amount: "x" });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(InvalidInputError);
    expect((thrown as InvalidInputError).issues[0]).toMatch(/^amount: /);
    expect((thrown as Error).message).not.toContain("secret-order");
    expect(() => parseOutput(charge, { chargeId: 7 })).toThrow(InvalidOutputError);
    expect(parseOutput(charge, { chargeId: "ch_1" })).toEqual({ chargeId: "ch_1" });
  });

  it("classifies errors, defaulting to unknown", () => {
    expect(classifyWith(charge, new RangeError("declined"))).toBe("terminal");
    expect(classifyWith(charge, new Error("socket hang up"))).toBe("unknown");
    const throwing = defineTool({
      ...charge,
      classifyError: () => {
        throw new Error("bug");
      },
    });
    expect(classifyWith(throwing, new RangeError())).toBe("unknown");
  });

  it("stores an error as name, message and code only", () => {
    const err = Object.assign(new TypeError("card declined"), { code: "card_declined", extra: "x" });
    expect(toStoredError(err)).toEqual({
      name: "TypeError",
      message: "card declined",
      code: "card_declined",
    });
    expect(toStoredError("boom")).toEqual({ name: "Error", message: "boom" });
  });
});
