// Liveness per process (docs/protocol.md, "Liveness"): a caller process that owns a claim keeps one liveness
// entry in the store; a claim names it. The owner here runs with a 30 s lease, so without its entry the next
// caller would wait half a minute before it reconciles.
//   a. SIGKILLed after the provider charged, before complete: its entry runs out within its time to live, and
//      the next caller reconciles through the provider's lookup at once — long before the lease would have.
//   b. SIGSTOPped past its entry's time to live, after the charge: the next caller reconciles; thawed, the
//      frozen owner's complete is refused (lost), and the provider saw one charge.
//   c. SIGSTOPped past its entry's time to live before the charge: the next caller charges (the reconcile
//      found nothing); thawed, the frozen owner's last look at its lease asks the store, finds its entry gone
//      and sends nothing.
//   d. alive, but its entry lost by the store (deleted, as a restart of a Redis that keeps nothing loses it):
//      the next caller reconciles; the owner's renewal finds the entry gone, and its complete is refused.

import { existsSync } from "node:fs";
import { deriveKey } from "@once/core";
import { InProcess } from "@once/engine";
import { RedisStore } from "@once/redis";
import { cleanupPrefix, clusterNodes, redisUrl } from "@once/support";
import { Cluster } from "ioredis";
import { describe, expect, it } from "vitest";
import type { InProcessCallConfig } from "../fixtures/in-process-call-config.js";
import { chargeTools } from "../fixtures/tools.js";
import { startInProcessCall } from "../support/processes.js";
import { type Scenario, withScenario } from "./scenario.js";

const LEASE_MS = 30_000;
const LIVENESS_TTL_MS = 1_000;
/** Well under the lease: what recovery through the liveness entry must take at most, on a loaded machine. */
const RECOVERY_BOUND_MS = 5_000;

/** The next caller, in the test's own process: a fresh InProcess with its own liveness entry. */
function nextCaller(s: Scenario): { runner: InProcess; tools: ReturnType<typeof chargeTools> } {
  const tools = chargeTools({ paymentsUrl: s.payments.url });
  const runner = new InProcess({ store: s.store, tools: tools.all, leaseMs: LEASE_MS, backoffMs: 10 });
  return { runner, tools };
}

/** What every case ends with: the record done under the claim that took over (fence 2), and one charge. */
async function expectTakenOverOnce(s: Scenario, step: { taskId: string; stepId: string }): Promise<void> {
  expect(await s.record(step.taskId, step.stepId)).toMatchObject({ state: "done", fence: 2 });
  const charges = s.charges();
  expect(charges.total).toBe(1);
  expect(charges.duplicates).toBe(0);
}

function startOwner(
  s: Scenario,
  step: { taskId: string; stepId: string },
  extra: Pick<InProcessCallConfig, "input"> &
    Partial<Pick<InProcessCallConfig, "pause" | "cluster" | "liveness">>,
) {
  return startInProcessCall({
    redisUrl: redisUrl(),
    storePrefix: s.storePrefix,
    paymentsUrl: s.payments.url,
    leaseMs: LEASE_MS,
    liveness: { ttlMs: LIVENESS_TTL_MS },
    step,
    ...extra,
  });
}

describe("liveness per process: an owner that dies or stalls is recovered within its entry's time to live", () => {
  it("a caller SIGKILLed after the charge: the next caller reconciles within a few seconds, not the 30 s lease", () =>
    withScenario({ label: "liveness-killed" }, async (s) => {
      const step = { taskId: `task-liveness-kill-${process.pid}`, stepId: "charge" };
      const owner = startOwner(s, step, {
        input: { orderId: "order-liveness-kill", amount: 4_200 },
        pause: { at: "after-charge" },
      });
      try {
        const charged = await owner.waitFor("charged", { timeoutMs: 15_000 });
        await owner.waitFor("paused", { timeoutMs: 5_000 });
        const record = await s.record(step.taskId, step.stepId);
        expect(record).toMatchObject({ state: "claimed", phase: "effect", fence: 1 });
        expect(record?.liveness).toMatch(/^[0-9a-f]{16}$/);
        await owner.kill("SIGKILL");
        const killedAt = performance.now();

        const { runner, tools } = nextCaller(s);
        const answer = await runner.call(
          tools.chargeCustomer,
          { orderId: "order-liveness-kill", amount: 4_200 },
          step,
        );
        const recoveryMs = performance.now() - killedAt;
        console.log(
          `liveness: SIGKILLed owner (lease ${LEASE_MS} ms, liveness ${LIVENESS_TTL_MS} ms) reconciled ` +
            `${Math.round(recoveryMs)} ms after the kill`,
        );
        expect(answer.outcome).toBe("reconciled");
        expect(answer.result.chargeId).toBe(charged.chargeId);
        expect(recoveryMs).toBeLessThan(RECOVERY_BOUND_MS);
        await expectTakenOverOnce(s, step);
      } finally {
        await owner.stop();
      }
    }));

  it("on a Redis Cluster (the entry and the record in different slots): a caller SIGKILLed after the charge is reconciled within a few seconds", () =>
    withScenario({ label: "liveness-cluster" }, async (s) => {
      const cluster = new Cluster(clusterNodes());
      const store = await RedisStore.create({ redis: cluster, prefix: s.storePrefix });
      const step = { taskId: `task-liveness-cluster-${process.pid}`, stepId: "charge" };
      const owner = startOwner(s, step, {
        cluster: true,
        input: { orderId: "order-liveness-cluster", amount: 4_250 },
        pause: { at: "after-charge" },
      });
      try {
        const charged = await owner.waitFor("charged", { timeoutMs: 15_000 });
        await owner.waitFor("paused", { timeoutMs: 5_000 });
        const live = (await store.get(deriveKey(step)))?.liveness;
        expect(live).toMatch(/^[0-9a-f]{16}$/);
        await owner.kill("SIGKILL");
        const killedAt = performance.now();
        const tools = chargeTools({ paymentsUrl: s.payments.url });
        const runner = new InProcess({ store, tools: tools.all, leaseMs: LEASE_MS, backoffMs: 10 });
        const answer = await runner.call(
          tools.chargeCustomer,
          { orderId: "order-liveness-cluster", amount: 4_250 },
          step,
        );
        const recoveryMs = performance.now() - killedAt;
        console.log(
          `liveness: SIGKILLed owner on a Redis Cluster (lease ${LEASE_MS} ms, liveness ${LIVENESS_TTL_MS} ms) ` +
            `reconciled ${Math.round(recoveryMs)} ms after the kill`,
        );
        expect(answer.outcome).toBe("reconciled");
        expect(answer.result.chargeId).toBe(charged.chargeId);
        expect(recoveryMs).toBeLessThan(RECOVERY_BOUND_MS);
        expect(await store.get(deriveKey(step))).toMatchObject({ state: "done", fence: 2 });
        expect(s.charges()).toMatchObject({ total: 1, duplicates: 0 });
      } finally {
        await owner.stop();
        await cleanupPrefix(cluster, s.storePrefix);
        await cluster.quit();
      }
    }));

  it("with liveness turned off, the same kill leaves the next caller in flight for the lease", () =>
    withScenario({ label: "liveness-off" }, async (s) => {
      const step = { taskId: `task-liveness-off-${process.pid}`, stepId: "charge" };
      const owner = startOwner(s, step, {
        liveness: false,
        input: { orderId: "order-liveness-off", amount: 4_300 },
        pause: { at: "after-charge" },
      });
      try {
        await owner.waitFor("paused", { timeoutMs: 15_000 });
        expect((await s.record(step.taskId, step.stepId))?.liveness).toBeUndefined();
        await owner.kill("SIGKILL");
        // Past what recovery takes with an entry: the claim is still the dead owner's, its lease not out.
        await new Promise((resolve) => setTimeout(resolve, 2 * LIVENESS_TTL_MS + 500));
        const record = await s.record(step.taskId, step.stepId);
        const same = await s.store.claim({
          key: deriveKey(step),
          fingerprint: record?.fingerprint ?? "",
          tool: "charge_customer",
          phase: "effect",
          leaseMs: LEASE_MS,
        });
        expect(same).toMatchObject({ outcome: "in_flight", state: "claimed", fence: 1 });
        if (same.outcome === "in_flight") expect(same.retryAfterMs).toBeGreaterThan(1_000);
      } finally {
        await owner.stop();
      }
    }));

  it("a caller SIGSTOPped after the charge past its entry: reconciled by the next caller; thawed, its complete is refused", () =>
    withScenario({ label: "liveness-frozen-after" }, async (s) => {
      const step = { taskId: `task-liveness-frozen-after-${process.pid}`, stepId: "charge" };
      const gate = s.gateFile("frozen-after");
      const owner = startOwner(s, step, {
        input: { orderId: "order-liveness-frozen-after", amount: 4_400 },
        pause: { at: "after-charge", gateFile: gate },
      });
      try {
        const charged = await owner.waitFor("charged", { timeoutMs: 15_000 });
        await owner.waitFor("paused", { timeoutMs: 5_000 });
        owner.freeze();
        const frozenAt = performance.now();
        const { runner, tools } = nextCaller(s);
        const answer = await runner.call(
          tools.chargeCustomer,
          { orderId: "order-liveness-frozen-after", amount: 4_400 },
          step,
        );
        const recoveryMs = performance.now() - frozenAt;
        console.log(
          `liveness: SIGSTOPped owner (after the charge) reconciled ${Math.round(recoveryMs)} ms after the stop`,
        );
        expect(answer.outcome).toBe("reconciled");
        expect(answer.result.chargeId).toBe(charged.chargeId);
        expect(recoveryMs).toBeLessThan(RECOVERY_BOUND_MS);

        s.openGate(gate);
        expect(existsSync(gate)).toBe(true);
        owner.thaw();
        const settled = await owner.waitFor("settled", { timeoutMs: 15_000 });
        // Its lease had more than 25 s left; its entry was gone, and the takeover raised the fence.
        expect(settled.error).toMatchObject({ name: "LeaseLostError" });
        await expectTakenOverOnce(s, step);
      } finally {
        await owner.stop();
      }
    }));

  it("the store loses a live owner's entry (as a Redis that keeps nothing does on a restart): the next caller reconciles, the owner's complete is refused", () =>
    withScenario({ label: "liveness-entry-lost" }, async (s) => {
      const step = { taskId: `task-liveness-lost-${process.pid}`, stepId: "charge" };
      const gate = s.gateFile("entry-lost");
      const owner = startOwner(s, step, {
        input: { orderId: "order-liveness-lost", amount: 4_300 },
        pause: { at: "after-charge", gateFile: gate },
      });
      try {
        const charged = await owner.waitFor("charged", { timeoutMs: 15_000 });
        await owner.waitFor("paused", { timeoutMs: 5_000 });
        const record = await s.record(step.taskId, step.stepId);
        expect(await s.redis.del(`${s.storePrefix}live:${record?.liveness}`)).toBe(1);
        const { runner, tools } = nextCaller(s);
        const answer = await runner.call(
          tools.chargeCustomer,
          { orderId: "order-liveness-lost", amount: 4_300 },
          step,
        );
        // The owner is alive and renewing, but an entry once gone is never made again: its claim is taken over.
        expect(answer.outcome).toBe("reconciled");
        expect(answer.result.chargeId).toBe(charged.chargeId);
        s.openGate(gate);
        const settled = await owner.waitFor("settled", { timeoutMs: 15_000 });
        expect(settled.error).toMatchObject({ name: "LeaseLostError" });
        await expectTakenOverOnce(s, step);
      } finally {
        await owner.stop();
      }
    }));

  it("a caller SIGSTOPped before the charge past its entry: the next caller charges; thawed, it sends nothing", () =>
    withScenario({ label: "liveness-frozen-before" }, async (s) => {
      const step = { taskId: `task-liveness-frozen-before-${process.pid}`, stepId: "charge" };
      const gate = s.gateFile("frozen-before");
      const owner = startOwner(s, step, {
        input: { orderId: "order-liveness-frozen-before", amount: 4_500 },
        pause: { at: "before-charge", gateFile: gate },
      });
      try {
        await owner.waitFor("paused", { timeoutMs: 15_000 });
        owner.freeze();
        const frozenAt = performance.now();
        const { runner, tools } = nextCaller(s);
        const answer = await runner.call(
          tools.chargeCustomer,
          { orderId: "order-liveness-frozen-before", amount: 4_500 },
          step,
        );
        const recoveryMs = performance.now() - frozenAt;
        console.log(
          `liveness: SIGSTOPped owner (before the charge) replaced ${Math.round(recoveryMs)} ms after the stop`,
        );
        // The reconcile found no charge: not applied, and the next caller ran the effect itself.
        expect(answer.outcome).toBe("executed");
        expect(recoveryMs).toBeLessThan(RECOVERY_BOUND_MS);

        s.openGate(gate);
        owner.thaw();
        const settled = await owner.waitFor("settled", { timeoutMs: 15_000 });
        expect(settled.error).toMatchObject({ name: "LeaseLostError" });
        expect(owner.all("charged")).toHaveLength(0);
        await expectTakenOverOnce(s, step);
      } finally {
        await owner.stop();
      }
    }));
});
