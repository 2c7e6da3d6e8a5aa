// A versioned script name stands for one Lua text and the record layout it writes. That holds only if a name,
// once released, never gets other Lua: test/script-digests.json keeps every name ever released with the SHA1
// it had, and this test holds the scripts of this build to it.

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SCRIPT_VERSION, scriptDigests } from "../src/index.js";

const MANIFEST = "test/script-digests.json";
const manifest = JSON.parse(
  readFileSync(new URL("./script-digests.json", import.meta.url), "utf8"),
) as Record<string, string>;

describe("script digests", () => {
  it("never change under a released name: a changed script needs a new SCRIPT_VERSION", async () => {
    const changed: string[] = [];
    const unlisted: string[] = [];
    for (const { command, sha1 } of await scriptDigests()) {
      const released = manifest[command];
      if (released === undefined) unlisted.push(`  "${command}": "${sha1}",`);
      else if (released !== sha1) changed.push(`  ${command}: ${released} in ${MANIFEST}, ${sha1} now`);
    }
    if (changed.length > 0) {
      expect.fail(
        `Lua changed under a released name (any byte counts, comments too):\n${changed.join("\n")}\n` +
          `Bump SCRIPT_VERSION (now "${SCRIPT_VERSION}") in src/script-names.ts, then add the new names to ` +
          `${MANIFEST}, keeping the old ones.`,
      );
    }
    if (unlisted.length > 0) {
      expect.fail(
        `Script names missing from ${MANIFEST}; add them, keeping the names of earlier versions:\n` +
          unlisted.join("\n"),
      );
    }
  });
});
