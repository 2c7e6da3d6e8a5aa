// The exact bytes of the key and the fingerprint, pinned (the way script-digests.json pins the Lua). Every live
// record is stored under a key from deriveKey and carries the fingerprint of its call: a change of either
// encoding passes every other test, and on deploy orphans every record or refuses every retry. These vectors
// make such a change fail here, with what it means.

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { canonicalJson, deriveKey, fingerprint, type StepIdentity } from "../src/index.js";

interface GoldenVectors {
  deriveKey: { name: string; identity: StepIdentity; hex: string }[];
  fingerprint: ({ name: string; tool: string; canonical: string; hex: string } & (
    | { input: unknown }
    | { inputJson: string }
  ))[];
}

const vectors = JSON.parse(
  readFileSync(new URL("./golden-vectors.json", import.meta.url), "utf8"),
) as GoldenVectors;

const KEY_CHANGED =
  "deriveKey's output changed. Every live record is stored under the old key: after a deploy each retry " +
  "derives a new key, finds no record and runs its effect again. Changing the key's encoding is a migration " +
  '(a new version tag, the old keys drained first), documented in docs/protocol.md under "Changing the key ' +
  'or the fingerprint" — never an update of golden-vectors.json';

const FINGERPRINT_CHANGED =
  "fingerprint's output changed. Every live record carries the old fingerprint: after a deploy each retry " +
  "of a call recorded before it is refused as a conflict (IdempotencyConflictError) instead of replaying its " +
  "result or finishing it. Changing the fingerprint's encoding is a migration (a version tag, the old records " +
  'drained first), documented in docs/protocol.md under "Changing the key or the fingerprint" — never an ' +
  "update of golden-vectors.json";

describe("golden vectors", () => {
  it.each(vectors.deriveKey.map((v) => [v.name, v] as const))("deriveKey: %s", (name, vector) => {
    expect(deriveKey(vector.identity), `${KEY_CHANGED} (vector "${name}")`).toBe(vector.hex);
  });

  it.each(vectors.fingerprint.map((v) => [v.name, v] as const))("fingerprint: %s", (name, vector) => {
    const input = "inputJson" in vector ? JSON.parse(vector.inputJson) : vector.input;
    expect(canonicalJson({ tool: vector.tool, input }), `${FINGERPRINT_CHANGED} (vector "${name}")`).toBe(
      vector.canonical,
    );
    expect(fingerprint(vector.tool, input), `${FINGERPRINT_CHANGED} (vector "${name}")`).toBe(vector.hex);
  });

  it("cover what the encodings must keep apart and what they must not", () => {
    const key = (name: string) => vectors.deriveKey.find((v) => v.name === name)?.hex;
    // A default namespace given or left out is one key; the pairs a naive separator conflates are two.
    expect(key("ascii, default namespace given: the same key")).toBe(
      key("ascii, default namespace left out"),
    );
    expect(key('"a:b", "c"')).not.toBe(key('"a", "b:c"'));
    expect(key('namespace "x", taskId "yz"')).not.toBe(key('namespace "xy", taskId "z"'));
    // The longest parts are the longest validateKeyPart allows: 256 UTF-16 code units.
    const longest = vectors.deriveKey.filter((v) => v.name.startsWith("longest"));
    expect(longest.map((v) => v.identity.stepId.length)).toEqual([256, 256]);
    expect(new Set(vectors.deriveKey.map((v) => v.hex)).size).toBe(vectors.deriveKey.length - 1);
  });
});
