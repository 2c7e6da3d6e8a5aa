import { CHAOS_TIMING } from "./chaos-config.js";
import type { ChaosReport } from "./judge-run.js";

/** The workers' store durability, as the reports name it: `off`, or `replicas:N`. */
export function durabilityName(report: ChaosReport): string {
  return report.durabilityReplicas === 0 ? "off" : `replicas:${report.durabilityReplicas}`;
}

/**
 * The one line a run ends with: `chaos:` for the `appendfsync always` run, `chaos[everysec]:` for the
 * everysec one, `chaos[failover:sentinel]:` or `chaos[failover:cluster]:` for a failover run, which also
 * names its durability and the records its failovers lost (acknowledged transitions gone after them).
 */
export function summaryLine(report: ChaosReport): string {
  const faults = Object.values(report.faultCounts).reduce((sum, n) => sum + n, 0);
  const failover = report.topology !== "standalone";
  const label = failover
    ? `chaos[failover:${report.topology}]`
    : report.fsync === "always"
      ? "chaos"
      : `chaos[${report.fsync}]`;
  const lostRecords = report.redisLosses.reduce((sum, loss) => sum + loss.lostKeys.length, 0);
  return (
    `${label}: ${report.store === "postgres" ? "store=postgres " : ""}seed=${report.seed}${failover ? ` durability=${durabilityName(report)}` : ""} ` +
    `calls=${report.calls} faults=${faults} duplicates=${report.duplicates} lost=${report.lost}` +
    `${failover ? ` lost_records=${lostRecords}` : ""} unknown=${report.unknown} reconciled=${report.reconciled} ` +
    `fence_rejected=${report.fenceRejected}`
  );
}

/** The figures of a run, for people: printed before the summary line. */
export function describeReport(report: ChaosReport): string[] {
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  const lines = [
    `chaos report (seed ${report.seed}, store ${report.store === "postgres" ? "PostgreSQL (queue on Redis)" : "Redis"}, ${report.topology === "standalone" ? "" : `failover:${report.topology}, durability ${durabilityName(report)}, `}appendfsync ${report.fsync}, transport ${report.transport}, ${report.calls} calls, ${(report.durationMs / 1000).toFixed(0)} s)`,
    `  faults: ${Object.entries(report.faultCounts)
      .map(([kind, n]) => `${kind} ${n}`)
      .join(", ")}`,
    `  calls that timed out at least once at the dispatcher: ${report.timedOutCalls} (${pct(report.timedOutShare)})`,
    `  records at the end: ${Object.entries(report.ends)
      .map(([state, n]) => `${state} ${n}`)
      .join(", ")}; stuck ${report.stuck}`,
    `  claims: ${Object.entries(report.claims)
      .map(([outcome, n]) => `${outcome} ${n}`)
      .join(", ")}`,
    `  reconciles settled by a hook: ${report.reconciled} (applied ${report.reconciledApplied}, not applied ${report.reconciledNotApplied}); unknown left: ${report.unknown} (with a hook: ${report.unknownWithHook}; the provider had acted on ${report.unknownApplied})`,
    `  fence rejections (attempts discarded because the store refused their token): ${report.fenceRejected}, ${report.fenceRejectedAfterFreeze} by workers just thawed from SIGSTOP${Object.entries(
      report.fenceRejectedOther,
    )
      .map(([why, n]) => `, ${n} ${why}`)
      .join("")}`,
    `  owner writes answered lost: ${Object.entries(report.refusedByOp)
      .map(([op, n]) => `${op} ${n}`)
      .join(", ")}`,
    `  attempts that ended in LeaseLostError: ${report.leaseLostAttempts}, of which ${report.leaseLostBeforeEffect} before sending anything to the provider`,
    `  worker stdout writes that blocked > 50 ms: ${report.slowStdout.count} (longest ${report.slowStdout.maxMs} ms)`,
    `  keys taken over while their owner was frozen: ${report.takenOverWhileFrozen}; owner writes accepted after a newer owner was granted: ${report.staleWritesAccepted.length}`,
    `  freezes with calls in flight: ${report.freezesWithWork}; worker processes started: ${report.workerStarts}; orchestrator processes: ${report.orchestratorStarts}`,
    `  requests to the provider: ${report.effectsSent}; from an owner's last check to the provider recording it: p50 ${report.checkToProviderP50Ms} ms, p99 ${report.checkToProviderP99Ms} ms, max ${report.maxCheckToProviderMs} ms; ${report.lateRequests.length} arrived ≥ half a lease (${CHAOS_TIMING.leaseMs / 2} ms) after their check`,
  ];
  for (const late of report.lateRequests.slice(0, 10)) lines.push(`    ${late}`);
  for (const loss of report.redisLosses) {
    const what =
      loss.kind === "kill-primary"
        ? ` (primary ${loss.killed} SIGKILLed, ${loss.serving} promoted)`
        : loss.emulatedCrashDroppedMs
          ? ` (emulated OS crash: last ${loss.emulatedCrashDroppedMs} ms of AOF, ${loss.droppedBytes} bytes, dropped)`
          : " (SIGKILL)";
    if (loss.server === "postgres") {
      lines.push(
        `  PostgreSQL restart (stop -m immediate) at +${(loss.at / 1000).toFixed(1)} s: down ${loss.downMs} ms; ` +
          `${loss.acked} acknowledged transitions checked; ${loss.lostKeys.length} keys lost one (${loss.goneKeys} records gone)`,
      );
      continue;
    }
    lines.push(
      `  Redis kill at +${(loss.at / 1000).toFixed(1)} s${what}: ` +
        `down ${loss.downMs} ms; ${loss.acked} acknowledged transitions checked; ${loss.lostKeys.length} keys lost one (${loss.goneKeys} records gone)`,
    );
  }
  if (report.topology !== "standalone") {
    lines.push(`  promotions no planned kill explains: ${report.unplannedPromotions.length}`);
    for (const detail of report.unplannedPromotions) lines.push(`    ${detail}`);
    lines.push(`  roles seen: ${report.roleChanges.join(", ")}`);
  }
  lines.push(
    `  duplicates: ${report.duplicates} (in the named window — owner frozen between its last check and the send: ${report.windowDuplicates}; on keys a Redis kill lost a transition of: ${report.duplicatesAfterLoss})`,
  );
  for (const detail of report.duplicateDetails.slice(0, 20)) lines.push(`    ${detail}`);
  lines.push(
    `  steps re-opened after their call had settled, driven again by the drain: ${report.reopened.length}`,
  );
  for (const detail of report.reopened.slice(0, 5)) lines.push(`    ${detail}`);
  lines.push(`  lost calls: ${report.lost}`);
  for (const detail of report.lostDetails.slice(0, 20)) lines.push(`    ${detail}`);
  if (report.resultMismatches.length > 0) {
    lines.push(`  result mismatches: ${report.resultMismatches.length}`);
    for (const detail of report.resultMismatches.slice(0, 20)) lines.push(`    ${detail}`);
  }
  return lines;
}
