import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { runCommand } from "@once/support";
import { afterAll, describe, expect, it } from "vitest";
import type { ApprovalFigures } from "../src/index.js";

const DEMO_MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url));
const dir = mkdtempSync(path.join(os.tmpdir(), "once-approvals-demo-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const REQUIRED = [
  "tasks",
  "tasksOk",
  "tasksCancelled",
  "orchestratorKills",
  "approvalsRequested",
  "approvalsAskedTwice",
  "approvalsApproved",
  "approvalsDenied",
  "chargesMade",
  "chargesUnderThreshold",
  "emailsSent",
  "effectsWithoutApproval",
  "effectsPerApprovalMax",
  "effectsAfterDeny",
  "effectsAfterCancel",
  "duplicateEffects",
  "wallMs",
] as const;

describe("pnpm demo -- --agent --approvals", () => {
  it("naive asks again after a restart and charges again; once asks once, charges once per approval, nothing after a deny or the cancel", async () => {
    expect(existsSync(DEMO_MAIN), "build @once/demo before testing it").toBe(true);
    const json = path.join(dir, "approvals.json");
    const { code, signal, stdout, stderr } = await runCommand(
      process.execPath,
      [DEMO_MAIN, "--agent", "--approvals", "--json", json],
      // About 15 s on a quiet machine; a loaded CI machine has taken many times that for the agent demo.
      { timeoutMs: 240_000 },
    );
    expect(code, `signal ${signal}\nstdout:\n${stdout}\nstderr:\n${stderr}`).toBe(0);

    const figures = JSON.parse(readFileSync(json, "utf8")) as Record<"naive" | "once", ApprovalFigures>;
    expect(Object.keys(figures)).toEqual(["naive", "once"]);
    // Why a task failed is a note on stdout: the one line each that says what went wrong.
    const failures = stdout
      .split("\n")
      .filter((line) => /task \S+ failed: /.test(line))
      .join("\n");
    for (const mode of ["naive", "once"] as const) {
      for (const field of REQUIRED) expect(typeof figures[mode][field], `${mode}.${field}`).toBe("number");
      expect(figures[mode], failures).toMatchObject({
        mode,
        tasks: 12,
        tasksFailed: 0,
        orchestratorKills: 2,
      });
      expect(figures[mode].cancelledTask, mode).toEqual(expect.any(String));
    }
    const { naive, once } = figures;
    // Killed while requests were pending, naive's restarted tasks start from the first message: the model
    // charges another amount, and the approver is asked again.
    expect(naive.approvalsAskedTwice).toBeGreaterThan(0);
    expect(naive.approvalsRequested).toBeGreaterThan(once.approvalsRequested);

    expect(once).toMatchObject({
      approvalsAskedTwice: 0,
      effectsWithoutApproval: 0,
      effectsAfterDeny: 0,
      effectsAfterCancel: 0,
      duplicateEffects: 0,
      tasksCancelled: 1,
      tasksOk: 11,
      cancelOutcome: "cancelled",
      // One email per order: the cancel came after each task's receipt went out.
      emailsSent: 12,
    });
    expect(once.effectsPerApprovalMax).toBeLessThanOrEqual(1);
    // Each task's charge was asked about once or needed no approval; every approval charged exactly once.
    expect(once.approvalsRequested + once.chargesUnderThreshold).toBe(12);
    expect(once.chargesMade).toBe(once.approvalsApproved + once.chargesUnderThreshold);
    expect(once.approvalsApproved).toBeGreaterThan(0);

    expect(stdout).toMatch(/approvals asked twice\s+│/);
    expect(stdout).toMatch(/SIGKILLed the orchestrator .* while \d+ requests were pending/);
    expect(stdout).toMatch(/SIGKILLed the orchestrator .* after the approver's decisions/);
    expect(stdout).not.toContain("FAIL");
  }, 300_000);
});
