import { describe, expect, it } from "vitest";
import { IdempotencyConflictError, LeaseLostError, OnceError } from "../src/index.js";

describe("OnceError.is", () => {
  it("recognises once errors by their code, also from another copy of @once/core", () => {
    const own = new LeaseLostError("k".repeat(64), "1.abc");
    expect(OnceError.is(own)).toBe(true);
    expect(OnceError.is(own, "ONCE_LEASE_LOST")).toBe(true);
    expect(OnceError.is(own, "ONCE_CONFLICT")).toBe(false);

    // What an error of a second copy of the package looks like to this one: another class, the same shape.
    class ForeignOnceError extends Error {
      readonly code = "ONCE_CONFLICT";
    }
    const foreign = new ForeignOnceError("key … already belongs to a different tool");
    expect(foreign instanceof IdempotencyConflictError).toBe(false);
    expect(OnceError.is(foreign, "ONCE_CONFLICT")).toBe(true);
  });

  it("refuses what is not a once error", () => {
    expect(OnceError.is(Object.assign(new Error("x"), { code: "ECONNREFUSED" }))).toBe(false);
    expect(OnceError.is({ code: "ONCE_CONFLICT", message: "not an Error" })).toBe(false);
    expect(OnceError.is(undefined)).toBe(false);
    expect(OnceError.is("ONCE_CONFLICT")).toBe(false);
  });
});
