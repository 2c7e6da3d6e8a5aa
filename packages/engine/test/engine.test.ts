import { defineTool, MemoryStore, TransactionStoreError } from "@once/core";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { DuplicateToolError, Engine, InProcess, InvalidOptionError, RetryWindowError } from "../src/index.js";

const tool = (name: string, kind: "read" | "effect" = "effect") =>
  defineTool({ name, kind, input: z.object({}), output: z.object({}), run: () => ({}) });

const engine = (overrides: Partial<ConstructorParameters<typeof Engine>[0]> = {}) =>
  new Engine({ store: new MemoryStore(), tools: [tool("charge")], retries: () => [], ...overrides });

describe("Engine: what every entry point checks before it starts", () => {
  it("refuses a lease too short to heartbeat, or not an integer, naming the option", () => {
    for (const leaseMs of [0, 50, 99, 1.5, Number.NaN, -1_000]) {
      expect(() => engine({ leaseMs })).toThrow(InvalidOptionError);
      expect(() => new InProcess({ store: new MemoryStore(), tools: [tool("charge")], leaseMs })).toThrow(
        /leaseMs must be an integer of at least 100/,
      );
    }
    expect(engine({ leaseMs: 100 }).retryWindow.worstCaseMs).toBe(0);
  });

  it("refuses a negative or fractional resume gap", () => {
    for (const resumeGapMs of [-1, 0.5]) expect(() => engine({ resumeGapMs })).toThrow(/resumeGapMs must be/);
  });

  it("refuses two tools of one name, and a transactional tool on a store that cannot commit it", () => {
    expect(() => engine({ tools: [tool("charge"), tool("charge")] })).toThrow(DuplicateToolError);
    const transactional = defineTool({
      name: "order",
      kind: "effect",
      transactional: true,
      input: z.object({}),
      output: z.object({}),
      run: () => ({}),
    });
    expect(() => engine({ tools: [transactional] })).toThrow(TransactionStoreError);
  });

  it("holds effect tools to the retry window, and an entry point without one to none", () => {
    const store = new MemoryStore({ retentionMs: 1_000 });
    const retries = () => [{ name: "attempts", ms: 5_000, detail: "1 × lease 5000" }];
    expect(() => engine({ store, retries })).toThrow(RetryWindowError);
    expect(engine({ store, retries, tools: [tool("lookup", "read")] }).retryWindow.worstCaseMs).toBe(5_000);
  });
});
