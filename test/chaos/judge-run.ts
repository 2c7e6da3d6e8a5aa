// The verdict's figures: a drained run's evidence (collect-evidence.ts) and what its faults did
// (fault-driver.ts), judged call by call and event by event into the ChaosReport. Only figures here; what a
// run must show to pass is chaos-profile.ts' verdict, and the lines for people are describe-report.ts'.

import { jobIdForKey } from "@once/bullmq";
import { deriveKey } from "@once/core";
import type { ChaosChild } from "./chaos-child.js";
import { CHAOS_TIMING } from "./chaos-config.js";
import type { WorkerEvent } from "./chaos-fleet.js";
import type { ChaosPlan } from "./chaos-plan.js";
import type { ChaosTopology } from "./chaos-redis.js";
import { type ChaosTransport, RECONCILING_TOOLS } from "./chaos-tools.js";
import type { AcceptedWrite, Effect, Evidence, Grant } from "./collect-evidence.js";
import type { ExecutedFault, FaultLog, FreezeEpisode } from "./fault-driver.js";
import type { RedisLoss } from "./redis-loss.js";
import { FINAL_WRITES } from "./reporting-store.js";
import type { RoleChange } from "./role-watch.js";

export interface ChaosReport {
  seed: number;
  transport: ChaosTransport;
  fsync: "always" | "everysec";
  /** One Redis, or primaries with replicas that the faults fail over. */
  topology: ChaosTopology;
  /** The workers' RedisStore durability: replicas that confirm each transition, 0 for none. */
  durabilityReplicas: number;
  store: "redis" | "postgres";
  calls: number;
  durationMs: number;
  faults: ExecutedFault[];
  faultCounts: Record<string, number>;
  /** Calls that timed out at least once at the dispatcher, and their share. */
  timedOutCalls: number;
  timedOutShare: number;
  ends: Record<string, number>;
  duplicates: number;
  /**
   * Duplicates the named window explains: the provider recorded the extra effect within a second of its
   * sender thawing from a SIGSTOP during which a newer owner was granted the key.
   */
  windowDuplicates: number;
  duplicateDetails: string[];
  lost: number;
  lostDetails: string[];
  stuck: number;
  unknown: number;
  /** `unknown` records of tools that have a reconcile hook: must be 0. */
  unknownWithHook: number;
  /** `unknown` calls whose effect the provider did record (an operator would resolve them as applied). */
  unknownApplied: number;
  /** Reconciles a hook settled: applied (found the effect) and not applied (ran it). */
  reconciled: number;
  reconciledApplied: number;
  reconciledNotApplied: number;
  /**
   * Attempts whose work was discarded because the store refused the owner's token (a write or heartbeat
   * answered `lost`): the completions of owners that had been replaced.
   */
  fenceRejected: number;
  /** Of those, by workers thawed within the 10 s before. */
  fenceRejectedAfterFreeze: number;
  /** The others, by what the events show. */
  fenceRejectedOther: Record<string, number>;
  /** Owner writes and heartbeats the store answered `lost`, by operation. */
  refusedByOp: Record<string, number>;
  /** Attempts that ended in LeaseLostError, whatever the reason (also a lease that ran out unconfirmed). */
  leaseLostAttempts: number;
  /** Lease-lost attempts whose owner had not sent its request to the provider: stopped in time. */
  leaseLostBeforeEffect: number;
  /** `done` calls whose delivered result is not the provider's one effect for that call. */
  resultMismatches: string[];
  /** From an owner's last look at its signal to the provider recording the request (its clock, ms). */
  maxCheckToProviderMs: number;
  checkToProviderP50Ms: number;
  checkToProviderP99Ms: number;
  lateRequests: string[];
  effectsSent: number;
  claims: Record<string, number>;
  redisLosses: RedisLoss[];
  /** Duplicates on keys a Redis kill lost a transition of. */
  duplicatesAfterLoss: number;
  /** Frozen workers that had calls in flight when frozen. */
  freezesWithWork: number;
  /** Keys a frozen worker held that another worker was granted while it was frozen. */
  takenOverWhileFrozen: number;
  /**
   * Owner writes Redis accepted although the key had already been granted to a newer owner (a higher fence)
   * before them: what fencing exists to prevent. Must be 0.
   */
  staleWritesAccepted: string[];
  /** Worker writes to stdout that blocked over 50 ms (the suite reading slowly): stalls the harness caused. */
  slowStdout: { count: number; maxMs: number };
  workerStarts: number;
  orchestratorStarts: number;
  /**
   * Steps whose record the orchestrator's last audit found not ended (claimed, reconciling, released) after
   * their call had settled, and drove again: re-opened by a worker running a job it no longer held.
   */
  reopened: string[];
  /**
   * Promotions no kill explains: a replica made master while its primary was alive (the Sentinels or the
   * Cluster deemed it down). Writes the old primary took meanwhile may be lost, confirmed or not.
   */
  unplannedPromotions: string[];
  /** Every role change of a data node the suite saw, in order (`+12.3s 6380 master`). */
  roleChanges: string[];
}

/** What the run was, besides its evidence. */
export interface RunFacts {
  seed: number;
  transport: ChaosTransport;
  fsync: "always" | "everysec";
  topology: ChaosTopology;
  durabilityReplicas: number;
  /** Where the records were. */
  store: "redis" | "postgres";
  /** When the orchestrator came up: the report's times count from it. */
  t0: number;
  /** From t0 to the end of the drain. */
  durationMs: number;
}

type Freezes = FaultLog["freezes"];

/** Judges a drained run into its report. */
export function judgeRun(run: RunFacts, evidence: Evidence, faults: FaultLog): ChaosReport {
  const { plan, children, orchestrators } = evidence;
  const calls = judgeCalls(evidence, faults, run.t0);
  const owners = judgeOwnerEvents(evidence.workerEvents, evidence.grantsByKey, faults.freezes);
  const latency = checkToProvider(evidence.effects, run.t0);
  const orchestrated = judgeOrchestratorEvents(orchestrators, plan, children, run.t0);
  const allFreezes = [...faults.freezes.values()].flat();
  return {
    seed: run.seed,
    transport: run.transport,
    fsync: run.fsync,
    topology: run.topology,
    durabilityReplicas: run.durabilityReplicas,
    store: run.store,
    calls: plan.calls.length,
    durationMs: run.durationMs,
    faults: faults.executed,
    faultCounts: countFaults(faults.executed),
    timedOutCalls: orchestrated.timedOut.size,
    timedOutShare: orchestrated.timedOut.size / plan.calls.length,
    ends: calls.ends,
    duplicates: calls.duplicates,
    windowDuplicates: calls.windowDuplicates,
    duplicateDetails: calls.duplicateDetails,
    lost: calls.lostDetails.length,
    lostDetails: calls.lostDetails,
    stuck: calls.stuck,
    unknown: calls.unknown,
    unknownWithHook: calls.unknownWithHook,
    unknownApplied: calls.unknownApplied,
    reconciled: owners.reconciledApplied + owners.reconciledNotApplied,
    reconciledApplied: owners.reconciledApplied,
    reconciledNotApplied: owners.reconciledNotApplied,
    fenceRejected: owners.fenceRejected,
    fenceRejectedAfterFreeze: owners.fenceRejectedAfterFreeze,
    fenceRejectedOther: owners.fenceRejectedOther,
    refusedByOp: owners.refusedByOp,
    leaseLostAttempts: owners.leaseLostAttempts,
    leaseLostBeforeEffect: owners.leaseLostBeforeEffect,
    resultMismatches: calls.resultMismatches,
    maxCheckToProviderMs: latency.maxCheckToProviderMs,
    checkToProviderP50Ms: latency.checkToProviderP50Ms,
    checkToProviderP99Ms: latency.checkToProviderP99Ms,
    lateRequests: latency.lateRequests,
    effectsSent: owners.effectsSent,
    claims: owners.claims,
    redisLosses: faults.redisLosses,
    duplicatesAfterLoss: calls.duplicatesAfterLoss,
    freezesWithWork: allFreezes.filter((episode) => episode.inFlight > 0).length,
    takenOverWhileFrozen: takenOverWhileFrozen(faults.freezes, evidence.grantsByKey),
    staleWritesAccepted: staleWritesAccepted(evidence.writesOk, evidence.grantsByKey),
    slowStdout: owners.slowStdout,
    workerStarts: children.filter((child) => child.name.startsWith("worker-")).length,
    reopened: orchestrated.reopened,
    unplannedPromotions: unplannedPromotions(evidence.roleChanges, faults.redisLosses, run.t0),
    roleChanges: evidence.roleChanges.map(
      (change) => `+${((change.at - run.t0) / 1000).toFixed(1)}s ${change.port} ${change.role}`,
    ),
    orchestratorStarts: orchestrators.length,
  };
}

/** Each planned call's end, from its record, the orchestrator's journal and the provider's ledger. */
function judgeCalls(
  evidence: Evidence,
  faults: FaultLog,
  t0: number,
): Pick<
  ChaosReport,
  | "ends"
  | "duplicates"
  | "windowDuplicates"
  | "duplicatesAfterLoss"
  | "duplicateDetails"
  | "lostDetails"
  | "resultMismatches"
  | "stuck"
  | "unknown"
  | "unknownWithHook"
  | "unknownApplied"
> {
  const { plan, records, progress, effectsByOrder, grantsByKey, children } = evidence;
  const lostKeys = new Set(faults.redisLosses.flatMap((loss) => loss.lostKeys));
  let duplicates = 0;
  let windowDuplicates = 0;
  let duplicatesAfterLoss = 0;
  const duplicateDetails: string[] = [];
  const lostDetails: string[] = [];
  const resultMismatches: string[] = [];
  let stuck = 0;
  let unknown = 0;
  let unknownWithHook = 0;
  let unknownApplied = 0;
  const ends: Record<string, number> = {};
  for (const call of plan.calls) {
    const key = deriveKey({ taskId: call.taskId, stepId: call.stepId });
    const record = records.get(key);
    const settled = progress.get(call.i);
    const orderId = String(call.input.orderId);
    // Every call has an order of its own: the provider's per-order count is the per-call count.
    const effects = effectsByOrder.get(orderId) ?? [];
    const state = record?.state ?? "missing";
    const lossNote = lostKeys.has(key) ? " — its record lost a transition in a Redis kill" : "";
    ends[state] = (ends[state] ?? 0) + 1;
    if (effects.length > 1) {
      duplicates += effects.length - 1;
      const keyGrants = grantsByKey.get(key) ?? [];
      const inWindow = effects.filter((e) => inNamedWindow(e, keyGrants, faults.freezes)).length;
      windowDuplicates += Math.min(inWindow, effects.length - 1);
      if (lostKeys.has(key)) duplicatesAfterLoss += effects.length - 1;
      duplicateDetails.push(
        `call ${call.i} (${call.tool}, key ${key.slice(0, 12)}…): ${effects.length} effects ` +
          effects
            .map(
              (e) =>
                `[${e.id} fence ${e.metadata.once_fence} pid ${e.metadata.once_pid} ` +
                `sent ${Date.parse(e.createdAt) - Number(e.metadata.once_checked_at)} ms after its check]`,
            )
            .join(" ") +
          lossNote +
          (duplicateDetails.length < 3 ? `\n${timeline(children, t0, key, call.i).join("\n")}` : ""),
      );
    }
    if (state === "claimed" || state === "reconciling" || state === "released") stuck += 1;
    if (state === "unknown") {
      unknown += 1;
      if (RECONCILING_TOOLS.has(call.tool)) unknownWithHook += 1;
      if (effects.length > 0) unknownApplied += 1;
    }
    const ended = state === "done" || state === "failed" || state === "unknown";
    if (!ended || settled === undefined || settled.end === "conflict") {
      lostDetails.push(
        `call ${call.i} (${call.tool}): record ${state}, orchestrator ${settled?.end ?? "never settled"}` +
          lossNote +
          (lostDetails.length < 5 ? `\n${timeline(children, t0, key, call.i).join("\n")}` : ""),
      );
    }
    if (state === "done") {
      const stored = JSON.parse(record?.result ?? "null") as { id?: string } | null;
      const effect = effects[0];
      if (!effect) resultMismatches.push(`call ${call.i}: done, but the provider has no effect for it`);
      else if (stored?.id !== effect.id && effects.length === 1)
        resultMismatches.push(`call ${call.i}: stored ${stored?.id}, provider ${effect.id}`);
      if (settled?.end === "done" && settled.id !== stored?.id && effects.length === 1)
        resultMismatches.push(
          `call ${call.i}: the orchestrator was handed ${settled.id}, stored ${stored?.id}`,
        );
    }
    if (state === "failed" && effects.length > 0) {
      resultMismatches.push(`call ${call.i}: failed, but the provider recorded ${effects.length} effect(s)`);
    }
  }
  return {
    ends,
    duplicates,
    windowDuplicates,
    duplicatesAfterLoss,
    duplicateDetails,
    lostDetails,
    resultMismatches,
    stuck,
    unknown,
    unknownWithHook,
    unknownApplied,
  };
}

/**
 * The named window's signature: the request reached the provider within a second of its sender thawing
 * from a SIGSTOP during which a newer owner was granted the key. (Where exactly the sender froze — before or
 * after its last look at the lease — the ledger cannot tell; that it slept through the takeover and then
 * sent, it can.)
 */
function inNamedWindow(effect: Effect, keyGrants: readonly Grant[], freezes: Freezes): boolean {
  const receivedAt = Date.parse(effect.createdAt);
  const pid = Number(effect.metadata.once_pid);
  const fence = Number(effect.metadata.once_fence);
  return [...freezes].some(
    ([child, episodes]) =>
      child.pid === pid &&
      episodes.some(
        (episode) =>
          episode.to <= receivedAt &&
          receivedAt - episode.to <= 1_000 &&
          grantedDuring(keyGrants, fence, episode),
      ),
  );
}

/** Fence rejections, lease losses, reconciles, claims and the requests sent, from the workers' events. */
function judgeOwnerEvents(
  workerEvents: readonly WorkerEvent[],
  grantsByKey: ReadonlyMap<string, readonly Grant[]>,
  freezes: Freezes,
): Pick<
  ChaosReport,
  | "claims"
  | "refusedByOp"
  | "fenceRejected"
  | "fenceRejectedAfterFreeze"
  | "fenceRejectedOther"
  | "reconciledApplied"
  | "reconciledNotApplied"
  | "leaseLostAttempts"
  | "leaseLostBeforeEffect"
  | "slowStdout"
  | "effectsSent"
> {
  const claims: Record<string, number> = {};
  const refusedByOp: Record<string, number> = {};
  let fenceRejected = 0;
  let fenceRejectedAfterFreeze = 0;
  const fenceRejectedOther: Record<string, number> = {};
  let reconciledApplied = 0;
  let reconciledNotApplied = 0;
  let leaseLostAttempts = 0;
  let leaseLostBeforeEffect = 0;
  const slowStdout = { count: 0, maxMs: 0 };
  // Owners (key#fence) that sent a request, that had a write refused, that settled their call.
  const sent = new Set<string>();
  const refused = new Set<string>();
  const settledOwners = new Set<string>();
  for (const { event } of workerEvents) {
    if (event.e === "send") sent.add(`${event.k}#${event.f}`);
    if (event.e === "s" && event.r === "lost") refused.add(`${event.k}#${event.f}`);
    if (event.e === "s" && event.r === "ok" && FINAL_WRITES.has(String(event.op))) {
      settledOwners.add(`${event.k}#${event.f}`);
    }
  }
  const afterFreeze = (child: ChaosChild, at: number) =>
    (freezes.get(child) ?? []).some((episode) => at >= episode.to - 50 && at <= episode.to + 10_000);
  for (const { child, event } of workerEvents) {
    if (event.e === "s") {
      if (event.op === "claim") claims[String(event.o)] = (claims[String(event.o)] ?? 0) + 1;
      else if (event.r === "lost" && event.op === "heartbeat") {
        // A heartbeat sent just before its owner's own final write is answered lost once that write landed.
        const own = settledOwners.has(`${event.k}#${event.f}`)
          ? "heartbeat after its owner's own settle"
          : "heartbeat";
        refusedByOp[own] = (refusedByOp[own] ?? 0) + 1;
      } else if (event.r === "lost") refusedByOp[String(event.op)] = (refusedByOp[String(event.op)] ?? 0) + 1;
      else if (event.r === "ok" && event.op === "resolveApplied") reconciledApplied += 1;
      else if (event.r === "ok" && event.op === "resolveNotApplied") reconciledNotApplied += 1;
    } else if (event.e === "failed" && event.name === "LeaseLostError") {
      leaseLostAttempts += 1;
      const owner = `${event.k}#${event.f}`;
      if (!sent.has(owner)) leaseLostBeforeEffect += 1;
      if (refused.has(owner)) {
        fenceRejected += 1;
        if (afterFreeze(child, event.at)) fenceRejectedAfterFreeze += 1;
        else {
          // Not a thawed worker: was the key really granted to someone else, or did the store refuse a
          // write it had already applied once (a command re-sent after a connection cut)?
          const k = String(event.k);
          const f = Number(event.f);
          const newer = (grantsByKey.get(k) ?? []).some((grant) => grant.f > f);
          const why = newer
            ? "by owners whose key was taken over"
            : "with no newer owner seen (a write re-sent after a cut, or a record a Redis loss rolled back)";
          fenceRejectedOther[why] = (fenceRejectedOther[why] ?? 0) + 1;
        }
      }
    } else if (event.e === "slow-stdout") {
      // A SIGSTOP that lands during the write is the freeze, not a slow reader.
      const took = Number(event.took);
      const frozen = (freezes.get(child) ?? []).some((ep) => ep.from < event.at + took && ep.to > event.at);
      if (frozen) continue;
      slowStdout.count += 1;
      slowStdout.maxMs = Math.max(slowStdout.maxMs, Number(event.took));
    }
  }
  return {
    claims,
    refusedByOp,
    fenceRejected,
    fenceRejectedAfterFreeze,
    fenceRejectedOther,
    reconciledApplied,
    reconciledNotApplied,
    leaseLostAttempts,
    leaseLostBeforeEffect,
    slowStdout,
    effectsSent: sent.size,
  };
}

/** Fencing, checked from the outside: no write by an owner may succeed after a newer owner was granted. */
function staleWritesAccepted(
  writesOk: readonly AcceptedWrite[],
  grantsByKey: ReadonlyMap<string, readonly Grant[]>,
): string[] {
  const stale: string[] = [];
  for (const write of writesOk) {
    // A grant whose answer was read before the write was even sent was executed by Redis first: the write
    // must have been refused. (A frozen worker reads its answers late, so only the send time proves order.)
    const newer = (grantsByKey.get(write.k) ?? []).find(
      (grant) => grant.f > write.f && grant.at < write.sent,
    );
    if (newer) {
      stale.push(
        `${write.who} ${write.op} fence ${write.f} on ${write.k.slice(0, 12)}… accepted after fence ${newer.f} was granted`,
      );
    }
  }
  return stale;
}

/** Keys a frozen worker held that were granted to a newer owner while it was frozen. */
function takenOverWhileFrozen(freezes: Freezes, grantsByKey: ReadonlyMap<string, readonly Grant[]>): number {
  let taken = 0;
  for (const episodes of freezes.values()) {
    for (const episode of episodes) {
      for (const [k, f] of episode.held) {
        if (grantedDuring(grantsByKey.get(k) ?? [], f, episode)) taken += 1;
      }
    }
  }
  return taken;
}

/** Whether the key was granted to an owner newer than `fence` while a worker was frozen. */
function grantedDuring(grants: readonly Grant[], fence: number, episode: FreezeEpisode): boolean {
  return grants.some((grant) => grant.f > fence && grant.at >= episode.from && grant.at <= episode.to);
}

/** From each owner's last check to the provider recording its request, on the provider's clock. */
function checkToProvider(
  effects: readonly Effect[],
  t0: number,
): Pick<
  ChaosReport,
  "maxCheckToProviderMs" | "checkToProviderP50Ms" | "checkToProviderP99Ms" | "lateRequests"
> {
  let maxCheckToProviderMs = 0;
  const lateRequests: string[] = [];
  const gaps: number[] = [];
  for (const effect of effects) {
    const checkedAt = Number(effect.metadata.once_checked_at);
    const gap = Date.parse(effect.createdAt) - checkedAt;
    gaps.push(gap);
    maxCheckToProviderMs = Math.max(maxCheckToProviderMs, gap);
    if (gap >= CHAOS_TIMING.leaseMs / 2) {
      lateRequests.push(
        `${effect.id} (order ${effect.orderId}, fence ${effect.metadata.once_fence}, pid ${effect.metadata.once_pid}): ` +
          `checked at +${((checkedAt - t0) / 1000).toFixed(2)} s, received ${gap} ms later`,
      );
    }
  }
  return {
    maxCheckToProviderMs,
    checkToProviderP50Ms: quantile(gaps, 0.5),
    checkToProviderP99Ms: quantile(gaps, 0.99),
    lateRequests,
  };
}

/** The calls that timed out at least once at the dispatcher, and the steps the last audit found re-opened. */
function judgeOrchestratorEvents(
  orchestrators: readonly ChaosChild[],
  plan: ChaosPlan,
  children: readonly ChaosChild[],
  t0: number,
): { timedOut: Set<number>; reopened: string[] } {
  const timedOut = new Set<number>();
  const reopened: string[] = [];
  for (const child of orchestrators) {
    for (const event of child.events) {
      if (event.e === "timeout") timedOut.add(Number(event.i));
      if (event.e === "reopened") {
        const call = plan.calls[Number(event.i)];
        const key = call ? deriveKey({ taskId: call.taskId, stepId: call.stepId }) : "";
        reopened.push(
          `call ${event.i} (${call?.tool}): ${event.state} at fence ${event.fence} in audit pass ${event.pass}\n` +
            timeline(children, t0, key, Number(event.i)).join("\n"),
        );
      }
    }
  }
  return { timedOut, reopened };
}

/** The faults that took effect, by kind (skipped ones do not count). */
function countFaults(executed: readonly ExecutedFault[]): Record<string, number> {
  const faultCounts: Record<string, number> = {};
  for (const fault of executed) {
    if (fault.detail.startsWith("skipped")) continue;
    faultCounts[fault.kind] = (faultCounts[fault.kind] ?? 0) + 1;
  }
  return faultCounts;
}

function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

/** What every process said about one call, in order: for the report of a call that went wrong. */
function timeline(children: readonly ChaosChild[], t0: number, key: string, i: number): string[] {
  const lines: { at: number; text: string }[] = [];
  for (const child of children) {
    for (const event of child.events) {
      if (event.k !== key && event.i !== i && event.job !== jobIdForKey(key)) continue;
      const { e, at, k: _k, ...rest } = event;
      lines.push({ at, text: `${child.name}(${child.pid}) ${e} ${JSON.stringify(rest)}` });
    }
  }
  return lines
    .sort((a, b) => a.at - b.at)
    .map((line) => `      +${((line.at - t0) / 1000).toFixed(3)}s ${line.text}`);
}

/**
 * Promotions (a node seen as a replica, then as the master) that no planned kill explains: each kill
 * explains one, from its SIGKILL to 5 s after Redis served again.
 */
function unplannedPromotions(
  changes: readonly RoleChange[],
  losses: readonly RedisLoss[],
  t0: number,
): string[] {
  const last = new Map<number, string>();
  const unexplained: string[] = [];
  const windows = losses
    .filter((loss) => loss.kind === "kill-primary")
    .map((loss) => ({ from: t0 + loss.at, to: t0 + loss.at + loss.downMs + 5_000, used: false }));
  for (const change of changes) {
    const before = last.get(change.port);
    last.set(change.port, change.role);
    if (change.role !== "master" || before !== "slave") continue;
    const window = windows.find((w) => !w.used && change.at >= w.from && change.at <= w.to);
    if (window) window.used = true;
    else
      unexplained.push(
        `127.0.0.1:${change.port} became master at +${((change.at - t0) / 1000).toFixed(1)} s`,
      );
  }
  return unexplained;
}
