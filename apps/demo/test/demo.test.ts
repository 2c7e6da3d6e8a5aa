import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { runCommand } from "@once/support";
import { afterAll, describe, expect, it } from "vitest";
import type { ModeFigures } from "../src/index.js";

const DEMO_MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url));
const dir = mkdtempSync(path.join(os.tmpdir(), "once-demo-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const REQUIRED = [
  "tasks",
  "calls",
  "retries",
  "chargesExpected",
  "chargesMade",
  "duplicateEffects",
  "dedupHits",
  "inFlightWaits",
  "reconciled",
  "unknown",
  "p50Ms",
  "p99Ms",
  "callsPerSec",
] as const;

describe("pnpm demo", () => {
  it("runs naive and once end to end with a killed worker: duplicates under naive, none under once", async () => {
    expect(existsSync(DEMO_MAIN), "build @once/demo before testing it").toBe(true);
    const json = path.join(dir, "figures.json");
    const { code, stdout, stderr } = await runCommand(process.execPath, [
      DEMO_MAIN,
      "--tasks",
      "20",
      "--workers",
      "2",
      "--kill",
      "--json",
      json,
      "--trace",
    ]);
    expect(code, `stdout:\n${stdout}\nstderr:\n${stderr}`).toBe(0);

    const figures = JSON.parse(readFileSync(json, "utf8")) as { naive: ModeFigures; once: ModeFigures };
    for (const mode of ["naive", "once"] as const) {
      for (const field of REQUIRED) expect(typeof figures[mode][field], `${mode}.${field}`).toBe("number");
      expect(figures[mode].tasks).toBe(20);
      expect(figures[mode].workerKills).toBe(1);
    }
    expect(figures.once.duplicateEffects).toBe(0);
    expect(figures.once.chargesMade).toBe(figures.once.chargesExpected);
    expect(figures.once.tasksFailed).toBe(0);
    expect(figures.naive.chargesMade).toBeGreaterThanOrEqual(figures.naive.chargesExpected);

    // The table, and a trace tree spanning both services.
    expect(stdout).toMatch(/charges duplicate\s+│/);
    expect(stdout).toMatch(
      /\[once\] trace of task once-\w+-\d+:\ntrace \w{32} · \d+ spans from (once-orchestrator, once-worker|once-worker, once-orchestrator)/,
    );
    expect(stdout).toMatch(/effect charge_customer/);
  });

  it("--backend postgres: queue and store on PostgreSQL, once still charges each order exactly once", async () => {
    const json = path.join(dir, "figures-postgres.json");
    const { code, stdout, stderr } = await runCommand(process.execPath, [
      DEMO_MAIN,
      "--backend",
      "postgres",
      "--tasks",
      "20",
      "--workers",
      "2",
      "--kill",
      "--json",
      json,
    ]);
    expect(code, `stdout:\n${stdout}\nstderr:\n${stderr}`).toBe(0);
    expect(stdout).toContain("queue on BullMQ's PostgreSQL backend, store a PostgresStore");
    const figures = JSON.parse(readFileSync(json, "utf8")) as { naive: ModeFigures; once: ModeFigures };
    for (const mode of ["naive", "once"] as const) {
      for (const field of REQUIRED) expect(typeof figures[mode][field], `${mode}.${field}`).toBe("number");
      expect(figures[mode].workerKills).toBe(1);
    }
    expect(figures.once.duplicateEffects).toBe(0);
    expect(figures.once.chargesMade).toBe(figures.once.chargesExpected);
    expect(figures.once.tasksFailed).toBe(0);
  });
});
