// What a Redis kill costs: the suite kills the run's Redis (chaos-redis.ts: a SIGKILL and a restart on the
// AOF, or an emulated OS crash that also drops the AOF's last writes; or, replicated, a primary SIGKILLed
// and a replica promoted), and before any client is let back in compares what Redis kept with every
// transition the workers saw it acknowledge before the kill. Then the killed primary rejoins as a replica.

import type { ChaosChild } from "./chaos-child.js";
import type { RedisKill } from "./chaos-redis.js";
import type { ChaosWorld } from "./chaos-world.js";
import { GRANTS } from "./reporting-store.js";
import { type RecordState, snapshotRecords } from "./store-records.js";

/** What one Redis kill cost: acknowledged transitions Redis no longer had once it served again. */
export interface RedisLoss {
  /** Which server was killed: the run's Redis (default), or the store's PostgreSQL. */
  server?: "redis" | "postgres";
  at: number;
  kind: RedisKill["kind"] | "restart-postgres";
  emulatedCrashDroppedMs?: number;
  /** The node killed, and the one that served its data after (itself restarted, or a promoted replica). */
  killed: string;
  serving: string;
  /** From the SIGKILL until Redis served again (restarted, or a replica promoted). */
  downMs: number;
  recordsBefore: number;
  recordsAfter: number;
  /** Keys with an acknowledged transition missing after the kill. */
  lostKeys: string[];
  /** Of those, keys whose record was gone entirely. */
  goneKeys: number;
  /** Acknowledged transitions compared. */
  acked: number;
  /** AOF bytes dropped (emulated crash). */
  droppedBytes?: number;
}

/**
 * Kills the run's Redis and waits until it serves again: both sides' proxies refuse new connections and cut
 * the open ones, so that no client writes between the kill and the look at what Redis kept.
 */
export async function killRedis(
  world: ChaosWorld,
  children: readonly ChaosChild[],
  fault: RedisKill,
  t0: number,
): Promise<RedisLoss> {
  const { redis, storePrefix } = world;
  const proxies = [world.workerProxies, world.orchestratorProxies];
  for (const proxy of proxies) proxy.refuse(true);
  const recordsBefore = await redis
    .masters()
    .then((masters) => snapshotRecords(masters, storePrefix))
    .then((records) => records.size)
    .catch(() => -1);
  const facts = await redis.kill(fault);
  const killAt = facts.killedAt;
  for (const proxy of proxies) proxy.cut();
  const downMs = Date.now() - killAt;
  // Before any client is let back in: what did Redis keep?
  const snapshot = await snapshotRecords(await redis.masters(), storePrefix);
  for (const proxy of proxies) proxy.refuse(false);
  await redis.rejoin();
  const loss = compareWithAcks(children, snapshot, killAt);
  return {
    at: killAt - t0,
    kind: fault.kind,
    ...(fault.kind === "kill-redis" && fault.dropLastMs !== undefined
      ? { emulatedCrashDroppedMs: fault.dropLastMs }
      : {}),
    killed: facts.killed,
    serving: facts.serving,
    downMs,
    recordsBefore,
    recordsAfter: snapshot.size,
    lostKeys: loss.lostKeys,
    goneKeys: loss.gone,
    acked: loss.acked,
    ...(facts.droppedBytes === undefined ? {} : { droppedBytes: facts.droppedBytes }),
  };
}

// A record's progress within one fence: a later transition of the same owner has a higher rank.
function rankOf(state: string | null, phase: string | null): number {
  if (state === "claimed") return phase === "effect" ? 2 : 1;
  if (state === "reconciling") return 1;
  if (state === null) return 0;
  return 3;
}
/** The rank (as `rankOf` gives it) a record holds once Redis acknowledged each owner transition. */
const ACK_RANK: Record<string, number> = {
  claim: 1,
  beginEffect: 2,
  resolveNotApplied: 2,
  complete: 3,
  failTerminal: 3,
  markUnknown: 3,
  release: 3,
  resolveApplied: 3,
  giveUp: 3,
};

/** Transitions the workers saw acknowledged before `killAt` that the store, restarted, no longer holds. */
export function compareWithAcks(
  children: readonly ChaosChild[],
  snapshot: Map<string, RecordState>,
  killAt: number,
): { lostKeys: string[]; gone: number; acked: number } {
  const expected = new Map<string, { fence: number; rank: number }>();
  let acked = 0;
  for (const child of children) {
    if (!child.name.startsWith("worker-")) continue;
    for (const event of child.events) {
      if (event.e !== "s" || event.at >= killAt) continue;
      const rank = ACK_RANK[String(event.op)];
      if (rank === undefined) continue;
      if (event.op === "claim" ? !GRANTS.has(String(event.o)) : event.r !== "ok") continue;
      acked += 1;
      const k = String(event.k);
      const fence = Number(event.f);
      const seen = expected.get(k);
      if (!seen || fence > seen.fence || (fence === seen.fence && rank > seen.rank)) {
        expected.set(k, { fence, rank });
      }
    }
  }
  const lostKeys: string[] = [];
  let gone = 0;
  for (const [key, want] of expected) {
    const have = snapshot.get(key);
    if (!have) {
      lostKeys.push(key);
      gone += 1;
      continue;
    }
    const rank = rankOf(have.state, have.phase);
    if (have.fence < want.fence || (have.fence === want.fence && rank < want.rank)) lostKeys.push(key);
  }
  return { lostKeys, gone, acked };
}
