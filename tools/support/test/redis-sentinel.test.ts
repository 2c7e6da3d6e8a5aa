import { afterAll, describe, expect, it } from "vitest";
import {
  portIsFree,
  type RedisServerHandle,
  redisCommand,
  type SentinelTopology,
  startSentinelTopology,
} from "../src/index.js";
import { Forwarders } from "./fixtures/forwarders.js";

let topology: SentinelTopology | undefined;
const forwarders = new Forwarders();
afterAll(async () => {
  await topology?.stop();
  forwarders.close();
});

const masterPort = async (port: number) =>
  /^master_port:(\d+)\r$/m.exec((await redisCommand("127.0.0.1", port, ["INFO", "replication"])) ?? "")?.[1];

const role = async (port: number) =>
  /^role:(\w+)\r$/m.exec((await redisCommand("127.0.0.1", port, ["INFO", "replication"])) ?? "")?.[1];

describe("startSentinelTopology", () => {
  it("fails a SIGKILLed primary over to a replica, takes the old one back as a replica, and stops it all", {
    timeout: 90_000,
  }, async () => {
    topology = await startSentinelTopology();
    const { nodes, sentinels } = topology;
    expect(nodes).toHaveLength(3);
    expect(sentinels).toHaveLength(3);
    const first = await topology.primary();
    expect(first).toBe(nodes[0]);
    expect(await role(first.port)).toBe("master");

    await topology.kill(first);
    const started = Date.now();
    const second = await topology.awaitPromotion(first);
    // down-after 1 s, then the election and the promotion: a few seconds, not the default 30 s.
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(second).not.toBe(first);
    expect(await role(second.port)).toBe("master");

    await topology.restartAsReplica(first);
    expect(await role(first.port)).toBe("slave");

    // A second failover has somewhere to go.
    await topology.kill(second);
    const third = await topology.awaitPromotion(second);
    expect(third).not.toBe(second);

    const ports = [...nodes, ...sentinels].map((server) => server.port);
    await topology.stop();
    topology = undefined;
    for (const port of ports) expect(await portIsFree(port)).toBe(true);
  });

  it("announces each data node where the caller says: the Sentinels and the replicas reach it there", {
    timeout: 90_000,
  }, async () => {
    topology = await startSentinelTopology({ replicas: 1, announcePort: forwarders.to });
    const [first, replica] = topology.nodes as [RedisServerHandle, RedisServerHandle];
    expect(topology.announcedPort(first)).not.toBe(first.port);
    expect(await topology.primary()).toBe(first);
    expect(await masterPort(replica.port)).toBe(String(topology.announcedPort(first)));

    await topology.kill(first);
    expect(await topology.awaitPromotion(first)).toBe(replica);
    await topology.restartAsReplica(first);
    expect(await masterPort(first.port)).toBe(String(topology.announcedPort(replica)));
    await topology.stop();
    topology = undefined;
  });
});
