import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  ApprovalStoreError,
  assertApprovalTools,
  assertTransactionalTools,
  defineTool,
  InvalidInputError,
  InvalidOutputError,
  InvalidToolError,
  MemoryStore,
  parseInput,
  parseOutput,
  TransactionStoreError,
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

  it("refuses a transactional declaration outside an effect tool, with a reconcile hook, or a bad database", () => {
    const base = { input: z.object({}), output: z.object({}), run: () => ({}) };
    expect(() => defineTool({ ...base, name: "r", kind: "read", transactional: true })).toThrow(
      /transactional is for effect tools only/,
    );
    expect(() =>
      defineTool({
        ...base,
        name: "e",
        kind: "effect",
        transactional: true,
        reconcile: async () => ({ applied: false }),
      }),
    ).toThrow(/needs no reconcile hook/);
    expect(() => defineTool({ ...base, name: "e", kind: "effect", transactional: { database: "" } })).toThrow(
      /transactional must be true or \{ database/,
    );
    expect(
      defineTool({ ...base, name: "e", kind: "effect", transactional: { database: "shop" } }).transactional,
    ).toEqual({
      database: "shop",
    });
  });

  it("refuses, at start, a transactional tool on a store without transactions or of another database", () => {
    const tool = defineTool({
      name: "create_order",
      kind: "effect",
      transactional: { database: "shop" },
      input: z.object({}),
      output: z.object({}),
      run: () => ({}),
    });
    expect(() => assertTransactionalTools([tool], new MemoryStore())).toThrow(TransactionStoreError);
    expect(() => assertTransactionalTools([tool], new MemoryStore())).toThrow(
      /MemoryStore has no transactions/,
    );
    const elsewhere = Object.assign(new MemoryStore(), {
      database: "ledger",
      completeInTransaction: async () => ({ outcome: "ok" as const, fence: 1 }),
    });
    expect(() => assertTransactionalTools([tool], elsewhere)).toThrow(/writes to database "shop"/);
    expect(() =>
      assertTransactionalTools([tool], Object.assign(elsewhere, { database: "shop" })),
    ).not.toThrow();
    expect(() => assertTransactionalTools([charge], new MemoryStore())).not.toThrow();
  });

  it("takes an approval policy on effect tools only, true or a function", () => {
    const base = { input: z.object({}), output: z.object({}), run: () => ({}) };
    for (const kind of ["read", "write"] as const)
      expect(() => defineTool({ ...base, name: "lookup", kind, approval: true } as never)).toThrow(
        /invalid tool "lookup": approval is for effect tools only/,
      );
    expect(() => defineTool({ ...base, name: "pay", kind: "effect", approval: "yes" as never })).toThrow(
      InvalidToolError,
    );
    expect(defineTool({ ...base, name: "pay", kind: "effect", approval: true }).approval).toBe(true);
    const policy = (input: { amount?: number }) => ((input.amount ?? 0) > 100 ? "over 100" : undefined);
    expect(defineTool({ ...base, name: "pay", kind: "effect", approval: policy }).approval).toBe(policy);
  });

  it("refuses, at start, an approval tool on a store that keeps no approval requests", () => {
    const pay = defineTool({
      name: "pay",
      kind: "effect",
      input: z.object({}),
      output: z.object({}),
      approval: true,
      run: () => ({}),
    });
    const bare = new MemoryStore();
    const withoutApprovals = {
      ...bare,
      retentionMs: bare.retentionMs,
      claim: bare.claim.bind(bare),
    } as never;
    expect(() => assertApprovalTools([pay], withoutApprovals)).toThrow(ApprovalStoreError);
    expect(() => assertApprovalTools([pay], new MemoryStore())).not.toThrow();
    expect(() => assertApprovalTools([charge], withoutApprovals)).not.toThrow();
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
