import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { runCommand } from "@once/support";
import { afterAll, describe, expect, it } from "vitest";
import type { AgentFigures } from "../src/index.js";

const DEMO_MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url));
const dir = mkdtempSync(path.join(os.tmpdir(), "once-agent-demo-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const REQUIRED = [
  "tasks",
  "tasksOk",
  "orchestratorKills",
  "toolCalls",
  "toolCallsResent",
  "chargesExpected",
  "chargesMade",
  "chargesDuplicate",
  "chargesMissing",
  "emailsSent",
  "duplicateEmails",
  "duplicateEffects",
  "modelCalls",
  "modelCallsRepeated",
  "modelCallsCutOff",
  "conflicts",
  "p50TaskMs",
  "p99TaskMs",
] as const;

describe("pnpm demo -- --agent", () => {
  it("runs the AI SDK loop naive and once with the orchestrator SIGKILLed twice: repeats under naive, none under once", async () => {
    expect(existsSync(DEMO_MAIN), "build @once/demo before testing it").toBe(true);
    const json = path.join(dir, "agent-figures.json");
    // All 20 tasks in flight at once: each kill lands while calls are running, some after their charge. It has
    // taken over runCommand's default 120 s on a loaded CI machine; the test's own limit is 180 s.
    const { code, signal, stdout, stderr } = await runCommand(
      process.execPath,
      [DEMO_MAIN, "--agent", "--tasks", "20", "--concurrency", "20", "--kill", "--json", json],
      { timeoutMs: 170_000 },
    );
    expect(code, `signal ${signal}\nstdout:\n${stdout}\nstderr:\n${stderr}`).toBe(0);

    const figures = (
      JSON.parse(readFileSync(json, "utf8")) as Record<string, Record<"naive" | "once", AgentFigures>>
    ).ai as Record<"naive" | "once", AgentFigures>;
    for (const mode of ["naive", "once"] as const) {
      for (const field of REQUIRED) expect(typeof figures[mode][field], `${mode}.${field}`).toBe("number");
      expect(figures[mode]).toMatchObject({ tasks: 20, tasksOk: 20, tasksFailed: 0, orchestratorKills: 2 });
    }
    const { naive, once } = figures;
    // A task restarted from scratch asks its model again from the first turn, and charges again if it had.
    expect(naive.duplicateEffects + naive.modelCallsRepeated).toBeGreaterThan(0);
    expect(naive.modelCallsRepeated).toBeGreaterThan(0);

    expect(once).toMatchObject({
      duplicateEffects: 0,
      modelCallsRepeated: 0,
      conflicts: 0,
      // Every order charged exactly once, and emailed once.
      chargesMade: 20,
      chargesDuplicate: 0,
      chargesMissing: 0,
      emailsSent: 20,
    });
    // Each turn asked once, bar a turn whose answer a kill cut off before it was recorded.
    expect(once.modelCalls - once.modelCallsCutOff).toBe(20 * 4);

    expect(stdout).toMatch(/model calls repeated \(tokens paid twice\)\s+│/);
    expect(stdout).toMatch(/SIGKILLed the orchestrator/);
  });

  it("--framework all: the OpenAI Agents SDK, LangGraph and Mastra too — the same tasks and kills, 0 / 0 under once on each", async () => {
    const json = path.join(dir, "frameworks.json");
    const { code, stdout, stderr } = await runCommand(
      process.execPath,
      [
        DEMO_MAIN,
        "--agent",
        "--framework",
        "all",
        "--tasks",
        "8",
        "--concurrency",
        "8",
        "--kill",
        "--json",
        json,
      ],
      { timeoutMs: 280_000 },
    );
    expect(code, `stdout:\n${stdout}\nstderr:\n${stderr}`).toBe(0);
    const figures = JSON.parse(readFileSync(json, "utf8")) as Record<
      string,
      Record<"naive" | "once", AgentFigures>
    >;
    expect(Object.keys(figures)).toEqual(["ai", "openai-agents", "langgraph", "mastra"]);
    for (const [framework, { naive, once }] of Object.entries(figures)) {
      for (const field of REQUIRED) expect(typeof once[field], `${framework}.once.${field}`).toBe("number");
      expect(naive, framework).toMatchObject({ framework, tasks: 8, tasksOk: 8, orchestratorKills: 2 });
      // Restarted from scratch, a naive task asks its model again from the first turn.
      expect(naive.modelCallsRepeated, framework).toBeGreaterThan(0);
      expect(once, framework).toMatchObject({
        framework,
        tasksOk: 8,
        orchestratorKills: 2,
        duplicateEffects: 0,
        modelCallsRepeated: 0,
        conflicts: 0,
        chargesMade: 8,
        emailsSent: 8,
      });
      expect(once.modelCalls - once.modelCallsCutOff, framework).toBe(8 * 4);
      expect(stdout).toContain(`${framework} once:`);
    }
  }, 300_000);
});
