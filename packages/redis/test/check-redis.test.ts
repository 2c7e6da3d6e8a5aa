import { OnceError } from "@once/core";
import {
  clusterNodes,
  type RedisServerHandle,
  redisUrl,
  startRedisServer,
  stopAllRedisServers,
} from "@once/support";
import { Cluster, Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { checkRedis, diagnoseRedis, RedisConfigError, RedisStore } from "../src/index.js";

const clients: (Redis | Cluster)[] = [];

function connect(url: string, options: { username?: string; password?: string } = {}): Redis {
  const client = new Redis(url, options);
  clients.push(client);
  return client;
}

afterEach(() => {
  for (const client of clients.splice(0)) client.disconnect();
});

afterAll(async () => {
  await stopAllRedisServers();
});

describe("maxmemory-policy", () => {
  let server: RedisServerHandle;
  let admin: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
  });

  afterAll(async () => {
    await admin.quit();
  });

  afterEach(async () => {
    await admin.config("SET", "maxmemory-policy", "noeviction");
  });

  it("accepts noeviction", async () => {
    const report = await checkRedis(connect(server.url));
    expect(report.maxmemoryPolicy).toBe("noeviction");
    expect(report.version).toMatch(/^\d+\.\d+/);
    expect(report.cluster).toBe(false);
    expect(report.nodes).toEqual([expect.objectContaining({ node: `127.0.0.1:${server.port}` })]);
  });

  it.each(["allkeys-lru", "volatile-ttl"])(
    "refuses %s: RedisConfigError naming the setting and the fix",
    async (policy) => {
      await admin.config("SET", "maxmemory-policy", policy);
      const error = await RedisStore.create({ redis: connect(server.url) }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RedisConfigError);
      expect(error).toBeInstanceOf(OnceError);
      expect(error).toMatchObject({
        code: "ONCE_REDIS_CONFIG",
        setting: "maxmemory-policy",
        name: "RedisConfigError",
      });
      const message = (error as Error).message;
      expect(message).toContain(policy);
      expect(message).toContain("CONFIG SET maxmemory-policy noeviction");
      expect(message).toContain("allowEviction");
    },
  );

  it("accepts an evicting policy with allowEviction, and warns", async () => {
    await admin.config("SET", "maxmemory-policy", "allkeys-lru");
    const store = await RedisStore.create({ redis: connect(server.url), allowEviction: true });
    expect(store.report?.maxmemoryPolicy).toBe("allkeys-lru");
    expect(store.report?.warnings.join("\n")).toMatch(/allkeys-lru and allowEviction is set/);
  });

  it("runs no checks with checks: false", async () => {
    await admin.config("SET", "maxmemory-policy", "allkeys-lru");
    const store = await RedisStore.create({ redis: connect(server.url), checks: false });
    expect(store.report).toBeUndefined();
  });
});

describe("persistence report", () => {
  it("warns that appendonly with appendfsync everysec can lose up to a second of records", async () => {
    const server = await startRedisServer({ appendonly: true, appendfsync: "everysec" });
    const report = await checkRedis(connect(server.url));
    expect(report).toMatchObject({ appendonly: true, appendfsync: "everysec", rdb: false });
    expect(report.warnings).toHaveLength(1);
    expect(report.warnings[0]).toMatch(
      /appendfsync everysec: a Redis crash can lose up to a second of records/,
    );
    await server.stop();
  });

  it("has nothing to say about appendfsync always", async () => {
    const server = await startRedisServer({ appendonly: true, appendfsync: "always" });
    const report = await checkRedis(connect(server.url));
    expect(report).toMatchObject({ appendonly: true, appendfsync: "always" });
    expect(report.warnings).toEqual([]);
    await server.stop();
  });

  it("warns when nothing persists the records", async () => {
    const server = await startRedisServer({ appendonly: false });
    const report = await checkRedis(connect(server.url));
    expect(report).toMatchObject({ appendonly: false, rdb: false });
    expect(report.warnings.join("\n")).toMatch(/no persistence .*a Redis restart loses every record/);
    await server.stop();
  });

  it("warns about RDB snapshots only", async () => {
    const server = await startRedisServer({ appendonly: false, extraArgs: ["--save", "3600 1"] });
    const report = await checkRedis(connect(server.url));
    expect(report).toMatchObject({ appendonly: false, rdb: true });
    expect(report.warnings.join("\n")).toMatch(/as of the last RDB snapshot/);
    await server.stop();
  });
});

describe("when CONFIG is not permitted", () => {
  let server: RedisServerHandle;
  let admin: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
    // What managed Redis services do: no CONFIG for the application's user, sometimes no INFO either.
    await admin.acl("SETUSER", "no-config", "on", ">secret", "~*", "&*", "+@all", "-config");
    await admin.acl("SETUSER", "no-config-no-info", "on", ">secret", "~*", "&*", "+@all", "-config", "-info");
  });

  afterAll(async () => {
    await admin.quit();
  });

  afterEach(async () => {
    await admin.config("SET", "maxmemory-policy", "noeviction");
  });

  it("warns, reads the policy from INFO instead, and starts", async () => {
    const redis = connect(server.url, { username: "no-config", password: "secret" });
    const store = await RedisStore.create({ redis });
    const warnings = store.report?.warnings.join("\n") ?? "";
    expect(warnings).toMatch(/CONFIG GET is not permitted \(NOPERM/);
    expect(warnings).toMatch(/maxmemory-policy was read from INFO instead/);
    expect(warnings).toMatch(/appendfsync and RDB save points could not be verified/);
    expect(store.report).toMatchObject({ maxmemoryPolicy: "noeviction", appendonly: false });
    expect(store.report?.appendfsync).toBeUndefined();
  });

  it("still refuses an evicting policy it can read from INFO", async () => {
    await admin.config("SET", "maxmemory-policy", "allkeys-lfu");
    const redis = connect(server.url, { username: "no-config", password: "secret" });
    await expect(RedisStore.create({ redis })).rejects.toMatchObject({ setting: "maxmemory-policy" });
  });

  it("warns that the policy could not be verified when INFO is not permitted either", async () => {
    const redis = connect(server.url, { username: "no-config-no-info", password: "secret" });
    const report = await checkRedis(redis);
    const warnings = report.warnings.join("\n");
    expect(warnings).toMatch(/maxmemory-policy could not be verified; make sure it is noeviction/);
    expect(warnings).toMatch(/the Redis version could not be verified/);
    expect(report.maxmemoryPolicy).toBeUndefined();
    expect(report.version).toBeUndefined();
  });

  it("warns when CONFIG is renamed away", async () => {
    const renamed = await startRedisServer({ extraArgs: ["--rename-command", "CONFIG", "once-test-config"] });
    const report = await checkRedis(connect(renamed.url));
    expect(report.warnings.join("\n")).toMatch(/CONFIG GET is not permitted \(ERR unknown command/);
    expect(report.maxmemoryPolicy).toBe("noeviction");
    await renamed.stop();
  });
});

describe("replication", () => {
  it("refuses a read-only replica", async () => {
    const master = await startRedisServer();
    const replica = await startRedisServer({ extraArgs: ["--replicaof", "127.0.0.1", String(master.port)] });
    const error = await checkRedis(connect(replica.url)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedisConfigError);
    expect(error).toMatchObject({ setting: "role" });
    expect((error as Error).message).toContain("read-only replica");
    await replica.stop();
    await master.stop();
  });
});

describe("Redis Cluster", () => {
  it("checks every master", async () => {
    const cluster = new Cluster(clusterNodes());
    clients.push(cluster);
    const report = await checkRedis(cluster);
    expect(report.cluster).toBe(true);
    expect(report.nodes).toHaveLength(3);
    expect(new Set(report.nodes.map((n) => n.node)).size).toBe(3);
    expect(report.maxmemoryPolicy).toBe("noeviction");
  });

  it("refuses a plain Redis client connected to a cluster node", async () => {
    const [first] = clusterNodes();
    if (!first) throw new Error("no cluster node");
    const error = await checkRedis(connect(`redis://${first.host}:${first.port}`)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedisConfigError);
    expect(error).toMatchObject({ setting: "cluster" });
    expect((error as Error).message).toContain("new Cluster");
  });
});

describe("the shared test Redis", () => {
  it("passes the checks", async () => {
    const report = await checkRedis(connect(redisUrl()));
    expect(report.maxmemoryPolicy).toBe("noeviction");
  });
});

describe("levels", () => {
  it("warns at start-up, and fails in production, a Redis that keeps nothing across a restart", async () => {
    const server = await startRedisServer({ appendonly: false });
    const startup = await checkRedis(connect(server.url));
    expect(startup.checks).toContainEqual(
      expect.objectContaining({
        check: "appendonly",
        status: "warn",
        fix: expect.stringContaining("appendonly yes"),
      }),
    );
    expect(startup.problems).toEqual([]);

    const error = await checkRedis(connect(server.url), { level: "production" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedisConfigError);
    expect(error).toMatchObject({ setting: "appendonly" });
    expect((error as Error).message).toMatch(
      /appendonly no and no RDB save points: a Redis restart loses every record/,
    );
    await server.stop();
  });

  it("judges memory in production only", async () => {
    const server = await startRedisServer();
    const startup = await diagnoseRedis(connect(server.url));
    const production = await diagnoseRedis(connect(server.url), { level: "production" });
    expect(startup.checks.map((c) => c.check)).not.toContain("memory");
    expect(production.checks).toContainEqual(
      expect.objectContaining({
        check: "memory",
        status: "ok",
        detail: expect.stringMatching(/used, no maxmemory limit$/),
      }),
    );
    await server.stop();
  });

  it("diagnoseRedis reports a failed check without throwing; checkRedis refuses with the same lines", async () => {
    const server = await startRedisServer({
      appendonly: false,
      extraArgs: ["--maxmemory-policy", "allkeys-lru"],
    });
    const report = await diagnoseRedis(connect(server.url), { level: "production" });
    const failed = report.checks.filter((c) => c.status === "fail").map((c) => c.check);
    expect(failed).toEqual(["maxmemory-policy", "appendonly"]);
    expect(report.problems).toHaveLength(2);
    const error = await checkRedis(connect(server.url), { level: "production" }).catch((e: unknown) => e);
    expect(error).toMatchObject({ setting: "maxmemory-policy", message: report.problems.join("\n") });
    await server.stop();
  });
});
