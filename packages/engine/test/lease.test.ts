import { LeaseLostError, MemoryStore, type Ownership } from "@once/core";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Lease } from "../src/lease.js";

const KEY = "c".repeat(64);

/** A store whose clock the test moves, and the first owner's claim on KEY. */
async function claimed(
  leaseMs: number,
): Promise<{ store: MemoryStore; owner: Ownership; advance(ms: number): void }> {
  let now = 1_000_000;
  const store = new MemoryStore({ now: () => now });
  const claim = await store.claim({ key: KEY, fingerprint: "fp", tool: "charge", phase: "effect", leaseMs });
  if (claim.outcome !== "acquired") throw new Error(`expected acquired, got ${claim.outcome}`);
  return { store, owner: claim, advance: (ms) => (now += ms) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

afterEach(() => {
  vi.restoreAllMocks();
});

describe("Lease", () => {
  it("judges freshness on the monotonic clock: a wall-clock step back does not make a stale lease look fresh", async () => {
    const { store, owner } = await claimed(400);
    const lease = new Lease(store, KEY, owner.token, 400);
    lease.stop(); // no heartbeats: nothing confirms the lease again
    expect(lease.fresh).toBe(true);
    const wall = Date.now;
    vi.spyOn(Date, "now").mockImplementation(() => wall() - 3_600_000); // NTP steps the clock back an hour
    await sleep(250); // more than half the lease
    expect(lease.fresh).toBe(false);
  });

  it("assert(): resolves at once while fresh, confirms a stale lease with a heartbeat, and throws when it was lost", async () => {
    const { store, owner, advance } = await claimed(300);
    const lease = new Lease(store, KEY, owner.token, 300);
    lease.stop();
    await expect(lease.assert()).resolves.toBeUndefined();

    await sleep(200); // stale, still this owner's on the store: a heartbeat confirms it and it is fresh again
    expect(lease.fresh).toBe(false);
    await expect(lease.assert()).resolves.toBeUndefined();
    expect(lease.fresh).toBe(true);

    // The store's lease runs out and another owner is granted the key.
    advance(1_000);
    expect(
      (await store.claim({ key: KEY, fingerprint: "fp", tool: "charge", phase: "effect", leaseMs: 300 }))
        .outcome,
    ).toBe("reconcile");
    await sleep(200);
    await expect(lease.assert()).rejects.toBeInstanceOf(LeaseLostError);
    expect(lease.lost).toBe(true);
    expect(lease.signal.aborted).toBe(true);
  });
});
