// audit against fixture modules: one with something of everything it flags, one clean.

import { jobRetryWindow } from "@once/bullmq/retry-window";
import { describe, expect, it } from "vitest";
import { jsonOf, runOnce } from "./run-once.js";

const FLAGGED = "test/fixtures/flagged-tools.mjs";
const CLEAN = "test/fixtures/clean-tools.mjs";

interface AuditJson {
  ok: boolean;
  tools: {
    name: string;
    kind: string;
    exports: string[];
    hooks: Record<string, boolean>;
    leaseMs?: number;
    flags: string[];
  }[];
  retryWindow: {
    applies: boolean;
    worstCaseMs: number;
    retentionMs: number;
    ok: boolean;
    terms: unknown[];
    leaseMs: number;
  };
  flags: { tool?: string; code: string; message: string }[];
  notes: { tool?: string; message: string }[];
}

describe.concurrent("audit", () => {
  it("flags effect tools without reconcile and read/write tools named like side effects (exit 1)", async () => {
    const run = await runOnce(["audit", "--tools", FLAGGED]);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^TOOL +KIND +PREPARE +RECONCILE +CLASSIFYERROR +LEASE +FLAGS$/m);
    expect(run.stdout).toMatch(/^charge_card +effect +yes +yes +yes +1m +-$/m);
    expect(run.stdout).toMatch(/^send_email +effect +no +no +no +30s \(worker's\) +no-reconcile$/m);
    expect(run.stdout).toMatch(/^refund_order +read +- +- +- +- +side-effect-name$/m);
    expect(run.stdout).toMatch(/^postComment +write +- +- +- +- +side-effect-name$/m);
    expect(run.stdout).toMatch(/^get_order_status +read +- +- +- +- +-$/m);
    expect(run.stdout).toMatch(/^set_status +write +- +- +- +- +-$/m);
    expect(run.stdout).toContain("Flags (3):");
    expect(run.stdout).toContain("send_email: effect tool without a reconcile hook");
    expect(run.stdout).toContain('refund_order: read tool whose name starts with "refund"');
    expect(run.stdout).toContain('postComment: write tool whose name starts with "post"');
    expect(run.stdout).toContain("send_email: no classifyError");
    expect(run.stdout).toContain("verdict: ok: retention 1d ≥ worst case 2m30s");
    expect(run.stdout).toMatch(/^3 flagged: exit 1$/m);
  });

  it("--json lists each tool once, with every export it was found under", async () => {
    const run = await runOnce(["audit", "--tools", FLAGGED, "--json"]);
    expect(run.code).toBe(1);
    const audit = jsonOf<AuditJson>(run);
    expect(audit.ok).toBe(false);
    expect(audit.tools.map((t) => t.name)).toEqual([
      "charge_card",
      "send_email",
      "refund_order",
      "postComment",
      "get_order_status",
      "set_status",
    ]);
    expect(audit.tools[0]).toMatchObject({
      kind: "effect",
      exports: ["chargeCard", "tools[0]"],
      hooks: { prepare: true, reconcile: true, classifyError: true },
      leaseMs: 60_000,
      flags: [],
    });
    expect(audit.flags.map((f) => [f.tool, f.code])).toEqual([
      ["send_email", "no-reconcile"],
      ["refund_order", "side-effect-name"],
      ["postComment", "side-effect-name"],
    ]);
  });

  it("--allow accepts reviewed names; the missing reconcile hook still fails", async () => {
    const run = await runOnce(["audit", "--tools", FLAGGED, "--allow", "refund_order,postComment", "--json"]);
    expect(run.code).toBe(1);
    expect(jsonOf<AuditJson>(run).flags.map((f) => f.code)).toEqual(["no-reconcile"]);
  });

  it("passes a clean module (exit 0)", async () => {
    const run = await runOnce(["audit", "--tools", CLEAN]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^charge_card +effect +yes +yes +yes +30s \(worker's\) +-$/m);
    expect(run.stdout).toMatch(/^nothing flagged$/m);
    const json = jsonOf<AuditJson>(await runOnce(["audit", "--tools", CLEAN, "--json"]));
    expect(json).toMatchObject({ ok: true, flags: [], retryWindow: { applies: true, ok: true } });
  });

  it("computes the retry window from the settings given, term by term, as workers do", async () => {
    const run = await runOnce([
      "audit",
      "--tools",
      CLEAN,
      ...["--attempts", "3", "--backoff", "10s", "--lease", "45s", "--lock-duration", "30s"],
      ...["--stalled-interval", "20s", "--timeout", "20s", "--retries", "1", "--resume-gap", "5m"],
      ...["--retention", "1h", "--json"],
    ]);
    expect(run.code).toBe(0);
    const expected = jobRetryWindow({
      attempts: 3,
      backoff: 10_000,
      leaseMs: 45_000,
      lockDurationMs: 30_000,
      stalledIntervalMs: 20_000,
      dispatcher: { retries: 1, timeoutMs: 20_000 },
      resumeGapMs: 300_000,
    });
    const audit = jsonOf<AuditJson>(run);
    expect(audit.retryWindow).toMatchObject({
      worstCaseMs: expected.worstCaseMs,
      terms: expected.terms.map((t) => ({ ...t, detail: expect.any(String) })),
      retentionMs: 3_600_000,
      ok: true,
    });
    // 2 fixed delays of 10s + 3 × (45s + 20s) + 1 × 20s + 5m
    expect(expected.worstCaseMs).toBe(20_000 + 195_000 + 20_000 + 300_000);
  });

  it("flags a retention shorter than the retry window (exit 1), printing every term", async () => {
    const run = await runOnce([
      "audit",
      "--tools",
      CLEAN,
      ...["--attempts", "5", "--backoff", "exponential:1h", "--retention", "2h"],
    ]);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^ +backoff +15h +BullMQ backoff over 5 attempts, maximum jitter$/m);
    expect(run.stdout).toMatch(
      /^ +attempts +5m +5 × \(max\(lease 30000 \(the worker's\), lockDuration 30000\) \+ stalledInterval 30000\)$/m,
    );
    expect(run.stdout).toMatch(/^ +dispatcher +1m +2 re-enqueues/m);
    expect(run.stdout).toMatch(/^ +resumeGap +0s /m);
    expect(run.stdout).toContain("verdict: TOO SHORT: retention 2h < worst case 15h6m");
    expect(run.stdout).toContain(
      "retry window: retention 2h is shorter than the worst-case retry window 15h6m",
    );
  });

  it("a module that throws while loading is a problem (exit 1), with its error", async () => {
    const run = await runOnce(["audit", "--tools", "test/fixtures/throws-on-load.mjs"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("the module failed to load: boom at import");
  });

  it("resolves the module against the working directory", async () => {
    const run = await runOnce(["audit", "--tools", "clean-tools.mjs"], {
      cwd: new URL("./fixtures/", import.meta.url).pathname,
    });
    expect(run.code).toBe(0);
  });
});
