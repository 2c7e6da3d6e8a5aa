import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const example = fileURLToPath(new URL("../dist/langgraph.js", import.meta.url));
const source = readFileSync(new URL("../src/langgraph.ts", import.meta.url), "utf8");

it("runs the README's example: the agent, then the same thread with its checkpoints lost — no model call, one charge", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [example], {
    env: process.env,
    timeout: 60_000,
  });
  expect(stdout).toContain("Charged. model calls: 2");
  expect(stdout).toContain("Charged. model calls on resume: 0, charges at the provider: 1");
});

it.each([
  ["@once/langgraph's README", "../../../packages/langgraph/README.md"],
  ["the repository's README", "../../../README.md"],
])("is %s example, word for word", (_name, readme) => {
  expect(readFileSync(new URL(readme, import.meta.url), "utf8")).toContain(`\`\`\`ts\n${source}\`\`\``);
});
