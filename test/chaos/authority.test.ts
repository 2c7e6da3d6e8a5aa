// The authority run inside `pnpm test`, on each store: approvals and cancellation while the agent processes
// that drive the tasks are SIGKILLed and resumed (chaos/authority/run-authority.ts). The long run is part of
// `pnpm test:chaos`. CHAOS_SEED=<n> replays a run's plan and fault schedule.

import { randomPrefix, startSentinelTopology } from "@once/support";
import { describe, expect, it } from "vitest";
import { type AuthorityStoreLocation, freshAuthorityLocation } from "./authority/authority-store.js";
import { authoritySummary, authorityVerdict, runAuthority } from "./authority/run-authority.js";
import { randomSeed } from "./random.js";

const seed = process.env.CHAOS_SEED === undefined ? randomSeed() : Number(process.env.CHAOS_SEED);

/** Runs the short authority workload on `location` and holds it to every guarantee. */
async function judgeAuthority(location: AuthorityStoreLocation): Promise<void> {
  const lines: string[] = [];
  try {
    const report = await runAuthority({
      seed,
      location,
      tasks: 40,
      durationMs: 12_000,
      kills: 4,
      approvalTtlMs: 4_000,
      log: (line) => lines.push(line),
    });
    lines.push(...report.details.slice(0, 20), authoritySummary(report));
    expect(authorityVerdict(report)).toEqual([]);
    expect(report.agentKills).toBe(4);
    expect(report.ends.cancelled + report.ends.denied + report.ends.expired).toBeGreaterThan(0);
  } finally {
    console.log(lines.join("\n"));
  }
}

const GUARANTEES =
  "no effect without an approval, at most one per approval, none after a deny or a cancel, no duplicate";

describe(`chaos, authority (seed ${seed}; rerun with CHAOS_SEED=${seed})`, () => {
  for (const kind of ["redis", "cluster", "postgres"] as const) {
    it(`${kind}: ${GUARANTEES}`, { timeout: 120_000 }, async () => {
      const { location, remove } = freshAuthorityLocation(kind);
      try {
        await judgeAuthority(location);
      } finally {
        await remove();
      }
    });
  }

  it(`sentinel (a primary, two replicas, three Sentinels; durability: both replicas): ${GUARANTEES}`, {
    timeout: 150_000,
  }, async () => {
    const topology = await startSentinelTopology({ appendonly: true });
    try {
      await judgeAuthority({
        kind: "sentinel",
        sentinels: [...topology.sentinelAddresses],
        name: topology.name,
        prefix: randomPrefix("authority"),
        replicas: 2,
      });
    } finally {
      await topology.stop();
    }
  });
});
