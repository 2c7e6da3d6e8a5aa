import { describe, expect, it } from "vitest";
import { describeRun, runCommand } from "../src/index.js";

const node = process.execPath;

describe("runCommand", () => {
  it("resolves with the exit code and what the command printed", async () => {
    const run = await runCommand(node, ["-e", "console.log('out'); console.error('err'); process.exit(4)"]);
    expect(run).toMatchObject({ code: 4, signal: null, stdout: "out\n", stderr: "err\n" });
    expect(describeRun(run)).toMatch(/: exit 4\n--- stdout\nout\n--- stderr\nerr$/);
  });

  it("writes `input` to its stdin, then closes it", async () => {
    const run = await runCommand(node, ["-e", "process.stdin.pipe(process.stdout)"], { input: "hello" });
    expect(run).toMatchObject({ code: 0, stdout: "hello" });
  });

  it("kills it after `timeoutMs`", async () => {
    const run = await runCommand(node, ["-e", "setTimeout(() => {}, 60_000)"], { timeoutMs: 200 });
    expect(run).toMatchObject({ code: null, signal: "SIGKILL" });
  });

  it("rejects when the command cannot be run", async () => {
    await expect(runCommand("/nonexistent/command", [])).rejects.toThrow(/cannot run \/nonexistent\/command/);
  });
});
