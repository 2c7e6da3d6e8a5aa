import { deriveKey } from "@once/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { jobIdForKey, keyFromJobId } from "../src/index.js";

const part = fc.string({
  unit: fc.constantFrom(":", "|", "/", "\\", "0", "a", "é", "\u{1F600}", " "),
  minLength: 1,
  maxLength: 12,
});
const triple = fc.record({ namespace: part, taskId: part, stepId: part });

describe("jobIdForKey", () => {
  it("is a valid BullMQ id (not all digits, no colon) and reversible", () => {
    fc.assert(
      fc.property(triple, (t) => {
        const key = deriveKey(t);
        const jobId = jobIdForKey(key);
        expect(jobId).not.toMatch(/^\d+$/);
        expect(jobId).not.toContain(":");
        expect(keyFromJobId(jobId)).toBe(key);
      }),
    );
  });

  it("reads no key out of a foreign id", () => {
    expect(keyFromJobId("123")).toBeUndefined();
    expect(keyFromJobId(`once-${"g".repeat(64)}`)).toBeUndefined();
  });
});
