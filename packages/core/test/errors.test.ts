import { describe, expect, it } from "vitest";
import { IdempotencyConflictError, LeaseLostError, OnceError, RecordLayoutError } from "../src/index.js";

describe("OnceError.is", () => {
  it("recognises once errors by their brand, also from another copy of a once package", () => {
    const own = new LeaseLostError("k".repeat(64), "1.abc");
    expect(OnceError.is(own)).toBe(true);
    expect(OnceError.is(own, "ONCE_LEASE_LOST")).toBe(true);
    expect(OnceError.is(own, "ONCE_CONFLICT")).toBe(false);

    // What an error of a second copy of the package looks like to this one: another class, the same brand.
    class ForeignOnceError extends Error {
      readonly code = "ONCE_CONFLICT";
      constructor(message: string) {
        super(message);
        Object.defineProperty(this, Symbol.for("once.error"), { value: true });
      }
    }
    const foreign = new ForeignOnceError("key … already belongs to a different tool");
    expect(foreign instanceof IdempotencyConflictError).toBe(false);
    expect(OnceError.is(foreign, "ONCE_CONFLICT")).toBe(true);
  });

  it("recognises a code no list in core knows: each package owns its codes", () => {
    class PluginError extends OnceError<"ONCE_PLUGIN_BROKEN"> {
      constructor() {
        super("ONCE_PLUGIN_BROKEN", "a store outside the workspace failed");
      }
    }
    const error = new PluginError();
    expect(OnceError.is(error, "ONCE_PLUGIN_BROKEN")).toBe(true);
    expect(error.name).toBe("PluginError");
  });

  it("refuses what is not a once error, whatever its code looks like", () => {
    expect(OnceError.is(Object.assign(new Error("x"), { code: "ECONNREFUSED" }))).toBe(false);
    expect(OnceError.is(Object.assign(new Error("x"), { code: "ONCE_CONFLICT" }))).toBe(false);
    expect(OnceError.is({ code: "ONCE_CONFLICT", message: "not an Error" })).toBe(false);
    expect(OnceError.is(undefined)).toBe(false);
    expect(OnceError.is("ONCE_CONFLICT")).toBe(false);
  });
});

describe("RecordLayoutError", () => {
  it("names the record, both layouts and what to do, with a code of its own", () => {
    const error = new RecordLayoutError("k".repeat(64), 4, 3, "@once/redis");
    expect(OnceError.is(error, "ONCE_RECORD_LAYOUT")).toBe(true);
    expect(error).toMatchObject({
      name: "RecordLayoutError",
      layout: 4,
      knownLayout: 3,
      store: "@once/redis",
    });
    expect(error.message).toBe(
      `@once/redis record ${"k".repeat(64)} was written by layout 4, this reader knows up to 3: upgrade it; nothing was read or run`,
    );
  });
});
