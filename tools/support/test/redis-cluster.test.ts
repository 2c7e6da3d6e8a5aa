import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  awaitClusterFailover,
  clusterMasters,
  killClusterNode,
  portIsFree,
  redisCommand,
  restartClusterNode,
  startRedisCluster,
  stopRedisCluster,
} from "../src/index.js";

const home = mkdtempSync(path.join(os.tmpdir(), "once-support-cluster-"));
const dir = path.join(home, "cluster");
afterAll(async () => {
  await stopRedisCluster(dir);
  rmSync(home, { recursive: true, force: true });
});

const role = async (port: number) =>
  /^role:(\w+)\r$/m.exec((await redisCommand("127.0.0.1", port, ["INFO", "replication"])) ?? "")?.[1];

describe("startRedisCluster with a replica per master", () => {
  it("promotes a SIGKILLed master's replica, takes the old master back as a replica, and stops it all", {
    timeout: 90_000,
  }, async () => {
    const cluster = await startRedisCluster(dir, {
      replicasPerMaster: 1,
      nodeTimeoutMs: 1_000,
      appendonly: true,
    });
    expect(cluster.ports).toHaveLength(6);
    const masters = (await clusterMasters(dir)) ?? [];
    expect(masters).toHaveLength(3);
    const [victim] = masters as [number];

    await killClusterNode(dir, victim);
    const started = Date.now();
    const after = await awaitClusterFailover(dir, victim);
    // cluster-node-timeout 1 s, then the replica's election: a few seconds.
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(after).toHaveLength(3);
    expect(after).not.toContain(victim);

    await restartClusterNode(dir, victim);
    expect(await role(victim)).toBe("slave");
    expect(await clusterMasters(dir)).toEqual(after);

    await stopRedisCluster(dir);
    for (const port of cluster.ports) expect(await portIsFree(port)).toBe(true);
  });
});
