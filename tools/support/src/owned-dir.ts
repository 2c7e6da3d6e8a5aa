// Temp dirs that name the process they belong to (`owner.json`), so that the global setup of a later test
// run can reap what a process killed before its cleanup left behind (see global-setup.ts).

import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

export const OWNER_FILE = "owner.json";
/** The prefix of the temp dirs that hold a throwaway cluster in `cluster/`. */
export const CLUSTER_HOME_PREFIX = "once-cluster-";

/** Makes a temp dir marked as this process's. */
export function makeOwnedTempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  writeFileSync(path.join(dir, OWNER_FILE), JSON.stringify({ pid: process.pid, startedAt: Date.now() }));
  return dir;
}

/** The pid a dir made by makeOwnedTempDir names; undefined for any other dir. */
export function ownerPid(dir: string): number | undefined {
  try {
    const { pid } = JSON.parse(readFileSync(path.join(dir, OWNER_FILE), "utf8")) as { pid?: unknown };
    return typeof pid === "number" ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Where a throwaway Redis Cluster of this process goes: `dir` (`<home>/cluster`) for startRedisCluster, in a
 * `home` the next test run's global setup stops and removes if this process dies first (its nodes are
 * daemonized: nothing else would stop them). Stop the cluster, then remove `home`.
 */
export function ownedClusterDir(): { home: string; dir: string } {
  const home = makeOwnedTempDir(CLUSTER_HOME_PREFIX);
  return { home, dir: path.join(home, "cluster") };
}
