import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const agent = fileURLToPath(new URL("../dist/openai-agents.js", import.meta.url));

it("runs the OpenAI Agents SDK agent, then resumes it: the recorded turns replay, no model call, one charge", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [agent], {
    env: process.env,
    timeout: 30_000,
  });
  expect(stdout).toContain("Charged. model calls: 2");
  expect(stdout).toContain("Charged. model calls on resume: 0, charges at the provider: 1");
});

it("is the README's example, word for word", () => {
  const readme = readFileSync(new URL("../../../README.md", import.meta.url), "utf8");
  const source = readFileSync(new URL("../src/openai-agents.ts", import.meta.url), "utf8");
  expect(readme).toContain(`\`\`\`ts\n${source}\`\`\``);
});
