import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const mcp = fileURLToPath(new URL("../dist/mcp.js", import.meta.url));

it("serves a once tool over MCP: refused without a step, charged once for a retried step and a resumed agent", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [mcp], {
    env: process.env,
    timeout: 30_000,
  });
  expect(stdout).toContain('without a step: [{"type":"text","text":"charge_customer is an effect tool');
  expect(stdout).toContain('retried: {"chargeId":"ch_1"}, replayed: true, charges of order_41: 1');
  expect(stdout).toContain("Charged. model calls: 2");
  expect(stdout).toContain("Charged. model calls on resume: 0, charges of order_42: 1");
});

it("is the README's example, word for word", () => {
  const readme = readFileSync(new URL("../../../README.md", import.meta.url), "utf8");
  const source = readFileSync(new URL("../src/mcp.ts", import.meta.url), "utf8");
  expect(readme).toContain(`\`\`\`ts\n${source}\`\`\``);
});
