// A cancel racing the claims of its task, on real servers and over several connections, so that the scripts
// of a claim and of a cancel really interleave: after cancelTask returns, no claim of the task is granted and
// no effect of it begins. On a Cluster a claim is two scripts (file on the task's entry, then claim on the
// record) and a cancel is a mark plus one visit per record, so this is where the argument of
// docs/cancellation.md is put to the test; on one server the claim is one script.

import { deriveKey, type TaskIdentity } from "@once/core";
import { cleanupPrefix, clusterNodes, randomPrefix, redisUrl } from "@once/support";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisStore } from "../src/index.js";

const ITERATIONS = 40;
// On a Cluster the window between a claim's two scripts is about one round trip: a loaded machine can run 40
// races without a cancel falling into it, so the races go on (up to this many) until one has.
const MAX_ITERATIONS = 400;
const STEPS = 16;
const CLAIMERS = 6;

interface Attempt {
  key: string;
  /** performance.now() when the call was sent, and when its answer came. */
  sentAt: number;
  answeredAt: number;
  outcome: string;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const topologies = [
  { name: "a Redis Cluster", client: () => new Cluster(clusterNodes()), twoSteps: true },
  { name: "one Redis server", client: () => new Redis(redisUrl()), twoSteps: false },
] as const;

describe.each(topologies)("a cancel racing its task's claims, on $name", ({ client, twoSteps }) => {
  // One client per claimer and one for the cancel: their commands travel on different connections.
  const clients: (Redis | Cluster)[] = [];
  const prefix = randomPrefix("cancel-race");

  beforeAll(() => {
    for (let i = 0; i <= CLAIMERS; i++) clients.push(client());
  });

  afterAll(async () => {
    const [first] = clients;
    if (first !== undefined) await cleanupPrefix(first, prefix);
    await Promise.all(clients.map((c) => c.quit()));
  });

  it(`grants no claim and begins no effect after cancelTask returned (${ITERATIONS} races of ${STEPS} steps)`, async () => {
    const stores = await Promise.all(
      clients.map((redis) => RedisStore.create({ redis, prefix, checks: false, retentionMs: 600_000 })),
    );
    const canceller = stores[CLAIMERS] as RedisStore;
    let grantedAfter = 0;
    let effectsAfter = 0;
    let granted = 0;
    let refused = 0;
    let refusedWhileRacing = 0;
    let effectsBegun = 0;
    let missed = 0;
    let tombstones = 0;

    const more = (iteration: number) =>
      iteration < ITERATIONS || (twoSteps && tombstones === 0 && iteration < MAX_ITERATIONS);
    for (let iteration = 0; more(iteration); iteration++) {
      const task = { namespace: "race", taskId: `task-${iteration}-${prefix}` };
      const step = (n: number): TaskIdentity => ({ ...task, stepId: `step-${n}` });
      const claims: Attempt[] = [];
      const effects: Attempt[] = [];
      let cancelReturnedAt = Number.POSITIVE_INFINITY;
      let stopClaiming = false;

      // Each claimer claims the steps in its own order, again and again, and begins the effect of every
      // claim it is granted, until a while after the cancel returned.
      const claimer = async (store: RedisStore, offset: number) => {
        for (let round = 0; !stopClaiming; round++) {
          const n = (offset * 5 + round * 3) % STEPS;
          const key = deriveKey(step(n));
          const sentAt = performance.now();
          const outcome = await store.claim({
            key,
            fingerprint: "fp",
            tool: "charge_card",
            phase: "prepare",
            leaseMs: 30_000,
            task: step(n),
          });
          claims.push({ key, sentAt, answeredAt: performance.now(), outcome: outcome.outcome });
          if (outcome.outcome === "acquired") {
            const begunAt = performance.now();
            const begun = await store.beginEffect(key, outcome.token);
            effects.push({ key, sentAt: begunAt, answeredAt: performance.now(), outcome: begun.outcome });
          }
          if (performance.now() > cancelReturnedAt + 15) stopClaiming = true;
        }
      };
      const running = stores.slice(0, CLAIMERS).map((store, i) => claimer(store, i));
      // The cancel comes at a different moment of each race — after 1 to 36 answered claims — counted, not
      // timed, so a loaded machine races as much as an idle one.
      const after = 1 + (iteration % 8) * 5;
      while (claims.length < after) await sleep(0);
      const cancel = await canceller.cancelTask(task, { by: "race@example.com", why: `race ${iteration}` });
      cancelReturnedAt = performance.now();
      await Promise.all(running);

      expect(cancel.outcome).toBe("cancelled");
      const reached = new Set([...cancel.stopped, ...cancel.running]);
      for (const claim of claims) {
        if (claim.outcome === "acquired") {
          granted++;
          if (claim.sentAt >= cancelReturnedAt) grantedAfter++;
          // A claim granted before the mark was filed before it: the cancel reached it.
          if (!reached.has(claim.key)) missed++;
        } else if (claim.outcome === "cancelled") {
          refused++;
          if (claim.sentAt < cancelReturnedAt) refusedWhileRacing++;
        }
      }
      for (const effect of effects) {
        if (effect.outcome !== "ok") continue;
        effectsBegun++;
        if (effect.sentAt >= cancelReturnedAt) effectsAfter++;
        // Begun before the cancel returned: the cancel saw it running, never stopped it unseen.
        if (!cancel.running.includes(effect.key)) missed++;
      }
      // Every call of the task is settled by the cancel: stopped, or running with the cancellation on it.
      const read = await canceller.readTask(task);
      expect(read.cancellation).toEqual(cancel.cancellation);
      for (const record of read.records) {
        // Never claimed: the cancel's visit came between the call's filing and its claim.
        if (record.claims === 0) tombstones++;
        const what = `race ${iteration}: ${JSON.stringify(record)}`;
        expect(["cancelled", "claimed"], what).toContain(record.state);
        if (record.state === "claimed") expect(record.phase, what).toBe("effect");
        expect(record.cancellation, what).toEqual(cancel.cancellation);
      }
    }

    const seen = JSON.stringify({ granted, refused, refusedWhileRacing, effectsBegun, tombstones });
    expect({ grantedAfter, effectsAfter, missed }, seen).toEqual({
      grantedAfter: 0,
      effectsAfter: 0,
      missed: 0,
    });
    // The races were real: claims were granted before the cancel, refused after it, and some claims sent
    // before it returned were refused (the cancel overtook them), and some effects began before it.
    expect(granted, seen).toBeGreaterThan(0);
    expect(refused, seen).toBeGreaterThan(0);
    expect(refusedWhileRacing, seen).toBeGreaterThan(0);
    expect(effectsBegun, seen).toBeGreaterThan(0);
    // On a Cluster the cancel also fell between a claim's two scripts (filed, not yet claimed), and left a
    // tombstone its claim was then refused by; on one server the claim is one script, so it never can.
    if (twoSteps) expect(tombstones, seen).toBeGreaterThan(0);
    else expect(tombstones, seen).toBe(0);
  }, 120_000);
});
