import { rmSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import {
  awaitClusterFailover,
  clusterMasters,
  killClusterNode,
  ownedClusterDir,
  portIsFree,
  redisCommand,
  restartClusterNode,
  startRedisCluster,
  stopRedisCluster,
} from "../src/index.js";
import { Forwarders } from "./fixtures/forwarders.js";

const { home, dir } = ownedClusterDir();
const forwarders = new Forwarders();
afterAll(async () => {
  await stopRedisCluster(dir);
  forwarders.close();
  rmSync(home, { recursive: true, force: true });
});

const replication = async (port: number, field: string) =>
  new RegExp(`^${field}:(\\w+)\\r$`, "m").exec(
    (await redisCommand("127.0.0.1", port, ["INFO", "replication"])) ?? "",
  )?.[1];

describe("startRedisCluster with a replica per master", () => {
  it("promotes a SIGKILLed master's replica, takes the old master back as a replica, and stops it all (each node behind a port of the caller's)", {
    timeout: 90_000,
  }, async () => {
    const announced = new Map<number, number>();
    const cluster = await startRedisCluster(dir, {
      replicasPerMaster: 1,
      nodeTimeoutMs: 1_000,
      appendonly: true,
      announcePort: async (port) => {
        announced.set(port, await forwarders.to(port));
        return announced.get(port) as number;
      },
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
    expect(await replication(victim, "role")).toBe("slave");
    // It replicates from the promoted master where that one is announced.
    const promoted = after.find((port) => !masters.includes(port)) as number;
    expect(await replication(victim, "master_port")).toBe(String(announced.get(promoted)));
    expect(await clusterMasters(dir)).toEqual(after);

    await stopRedisCluster(dir);
    for (const port of cluster.ports) expect(await portIsFree(port)).toBe(true);
  });
});
