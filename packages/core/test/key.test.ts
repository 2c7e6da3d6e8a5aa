import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { deriveKey, effectKey, InvalidKeyPartError, isKey, MissingStepIdentityError } from "../src/index.js";

// Parts made mostly of the characters a naive encoding would use as separators.
const part = fc.string({
  unit: fc.constantFrom(":", "|", "/", "\\", "0", "a", "é", "\u{1F600}", " "),
  minLength: 1,
  maxLength: 12,
});
const triple = fc.record({ namespace: part, taskId: part, stepId: part });

describe("deriveKey", () => {
  it("is 64 lowercase hex chars and deterministic", () => {
    const key = deriveKey({ taskId: "task-1", stepId: "step-3" });
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(deriveKey({ taskId: "task-1", stepId: "step-3", namespace: "default" })).toBe(key);
  });

  it("never maps two different triples to one key, even with separator characters", () => {
    fc.assert(
      fc.property(triple, triple, (a, b) => {
        const same = a.namespace === b.namespace && a.taskId === b.taskId && a.stepId === b.stepId;
        expect(deriveKey(a) === deriveKey(b)).toBe(same);
      }),
      { numRuns: 2_000 },
    );
  });

  it("keeps apart the pair the article's f'{task}:{step}' conflates", () => {
    expect(deriveKey({ taskId: "a:b", stepId: "c" })).not.toBe(deriveKey({ taskId: "a", stepId: "b:c" }));
    expect(deriveKey({ namespace: "x", taskId: "yz", stepId: "w" })).not.toBe(
      deriveKey({ namespace: "xy", taskId: "z", stepId: "w" }),
    );
  });

  it.each([
    [{ taskId: "", stepId: "s" }, /taskId: must not be empty/],
    [{ taskId: "t", stepId: "x".repeat(257) }, /stepId: must be at most 256/],
    [{ taskId: "t\n", stepId: "s" }, /taskId: must not contain control characters/],
    [{ taskId: "t", stepId: "s", namespace: "\u0000" }, /namespace: must not contain control/],
    [{ taskId: 42, stepId: "s" }, /taskId: must be a string/],
    [{ taskId: "t", stepId: "\ud800" }, /stepId: must be well-formed/],
  ])("rejects a bad part %#", (identity, message) => {
    expect(() => deriveKey(identity as never)).toThrow(InvalidKeyPartError);
    expect(() => deriveKey(identity as never)).toThrow(message);
  });

  it("accepts the longest allowed part", () => {
    expect(isKey(deriveKey({ taskId: "t".repeat(256), stepId: "s" }))).toBe(true);
  });
});

describe("effectKey", () => {
  it("is deriveKey for a call that names its step, and names what is missing otherwise", () => {
    expect(effectKey("charge", { taskId: "t", stepId: "s" })).toBe(deriveKey({ taskId: "t", stepId: "s" }));
    expect(() => effectKey("charge", { taskId: "t" })).toThrow(MissingStepIdentityError);
    expect(() => effectKey("charge", {})).toThrow(/taskId and stepId required/);
  });
});
