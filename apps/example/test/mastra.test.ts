import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const example = fileURLToPath(new URL("../dist/mastra.js", import.meta.url));
const source = readFileSync(new URL("../src/mastra.ts", import.meta.url), "utf8");

it("runs the README's example: the agent, then the same run again — no model call, one charge", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [example], {
    env: process.env,
    timeout: 60_000,
  });
  expect(stdout).toContain("Charged. model calls: 2");
  expect(stdout).toContain("Charged. model calls on resume: 0, charges at the provider: 1");
});

it.each([
  ["@once/mastra's README", "../../../packages/mastra/README.md"],
  ["the repository's README", "../../../README.md"],
])("is %s example, word for word", (_name, readme) => {
  expect(readFileSync(new URL(readme, import.meta.url), "utf8")).toContain(`\`\`\`ts\n${source}\`\`\``);
});
