// doctor against throwaway redis-server processes this file owns, set up well and badly.

import { diagnoseRedis, RedisStore, SCRIPT_VERSION } from "@once/redis";
import {
  freePort,
  type RedisServerHandle,
  redisUrl,
  startRedisServer,
  stopAllRedisServers,
} from "@once/support";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { jsonOf, runOnce } from "./run-once.js";

interface DoctorJson {
  ok: boolean;
  cluster: boolean;
  findings: { node: string; check: string; status: string; detail: string; fix?: string }[];
  startupCheck: { ok: boolean; setting?: string };
}

let server: RedisServerHandle;
let admin: Redis;

beforeAll(async () => {
  // Set up the way once wants it: noeviction (startRedisServer's default) and an AOF fsynced on every write.
  server = await startRedisServer({ appendonly: true, appendfsync: "always" });
  admin = new Redis(server.url);
});

afterEach(async () => {
  await admin.config("SET", "maxmemory-policy", "noeviction");
  await admin.config("SET", "appendonly", "yes");
  await admin.config("SET", "appendfsync", "always");
});

afterAll(async () => {
  await admin.quit();
  await stopAllRedisServers();
});

const doctor = (...args: string[]) => runOnce(["doctor", "--redis-url", server.url, ...args]);

describe("doctor", () => {
  it("passes a Redis set up the way once wants (exit 0)", async () => {
    const run = await doctor();
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const at = `127.0.0.1:${server.port}`;
    expect(run.stdout).toContain(`once doctor: ${server.url} (standalone)`);
    expect(run.stdout).toMatch(new RegExp(`^${at} +version +ok +Redis \\d+\\.\\d+`, "m"));
    expect(run.stdout).toMatch(new RegExp(`^${at} +role +ok +master$`, "m"));
    expect(run.stdout).toMatch(new RegExp(`^${at} +cluster +ok +standalone$`, "m"));
    expect(run.stdout).toMatch(new RegExp(`^${at} +maxmemory-policy +ok +noeviction$`, "m"));
    expect(run.stdout).toMatch(
      new RegExp(`^${at} +appendfsync +ok +appendonly yes, appendfsync always`, "m"),
    );
    expect(run.stdout).toMatch(
      new RegExp(`^${at} +clock +ok +server clock [+-][\\d.]+m?s from this machine`, "m"),
    );
    expect(run.stdout).toMatch(
      new RegExp(`^${at} +scripts +ok +(all \\d+|\\d+ of \\d+) once ${SCRIPT_VERSION} scripts cached`, "m"),
    );
    expect(run.stdout).toContain("RedisStore.create would start on this Redis");
    expect(run.stdout).toMatch(/^no problems$/m);
  });

  it("fails an evicting maxmemory-policy (exit 1), naming the setting and the fix", async () => {
    await admin.config("SET", "maxmemory-policy", "allkeys-lru");
    const run = await doctor();
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/maxmemory-policy +FAIL +allkeys-lru: Redis may evict once's records/);
    expect(run.stdout).toContain("Problems that can cause duplicates (1):");
    expect(run.stdout).toContain(
      "fix: CONFIG SET maxmemory-policy noeviction, and set maxmemory-policy noeviction in redis.conf",
    );
    expect(run.stdout).toContain("RedisStore.create would REFUSE this Redis (maxmemory-policy)");
    expect(run.stdout).toMatch(/^1 problem: exit 1$/m);

    const json = jsonOf<DoctorJson>(await doctor("--json"));
    expect(json.ok).toBe(false);
    expect(json.startupCheck).toMatchObject({ ok: false, setting: "maxmemory-policy" });
    expect(json.findings.filter((f) => f.status === "fail")).toEqual([
      expect.objectContaining({
        check: "maxmemory-policy",
        fix: expect.stringContaining("CONFIG SET maxmemory-policy noeviction"),
      }),
    ]);
  });

  it("fails a Redis without an AOF (exit 1): a restart loses every record", async () => {
    await admin.config("SET", "appendonly", "no");
    const run = await doctor();
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(
      /appendonly +FAIL +appendonly no and no RDB save points: a Redis restart loses every record/,
    );
    expect(run.stdout).toContain("fix: CONFIG SET appendonly yes");
  });

  it("fails appendfsync no (exit 1) and warns about everysec (exit 0)", async () => {
    await admin.config("SET", "appendfsync", "no");
    const no = await doctor();
    expect(no.code).toBe(1);
    expect(no.stdout).toMatch(/appendfsync +FAIL +appendonly yes, appendfsync no/);

    await admin.config("SET", "appendfsync", "everysec");
    const everysec = await doctor();
    expect(everysec.code).toBe(0);
    expect(everysec.stdout).toMatch(
      /appendfsync +WARN +appendonly yes, appendfsync everysec: a Redis crash can lose up to a second/,
    );
    expect(everysec.stdout).toMatch(/^no problems, 1 warning$/m);
  });

  it("--json reports every check", async () => {
    const run = await doctor("--json");
    expect(run.code).toBe(0);
    const json = jsonOf<DoctorJson>(run);
    expect(json).toMatchObject({ ok: true, cluster: false, startupCheck: { ok: true } });
    expect(json.findings.map((f) => f.check)).toEqual([
      "version",
      "role",
      "replicas",
      "cluster",
      "maxmemory-policy",
      "memory",
      "appendfsync",
      "clock",
      "scripts",
    ]);
  });

  it("says once's scripts are cached after a store used this Redis", async () => {
    const store = await RedisStore.create({ redis: admin, prefix: "doctor-test:" });
    for (const key of ["a", "b"]) await store.get(key.repeat(64));
    const run = await doctor("--json");
    const scripts = jsonOf<DoctorJson>(run).findings.find((f) => f.check === "scripts");
    expect(scripts?.detail).toMatch(
      new RegExp(`^(all \\d+|\\d+ of \\d+) once ${SCRIPT_VERSION} scripts cached`),
    );
    expect(scripts?.detail).not.toMatch(/^0 of/);
  });

  it("shows the store's own checks at the production level, and adds only its clock and script checks", async () => {
    // RDB snapshots only: a setting doctor used to judge in words of its own.
    await admin.config("SET", "appendonly", "no");
    await admin.config("SET", "save", "3600 1");
    let report: Awaited<ReturnType<typeof diagnoseRedis>>;
    let json: DoctorJson;
    try {
      report = await diagnoseRedis(admin, { level: "production" });
      json = jsonOf<DoctorJson>(await doctor("--json"));
    } finally {
      await admin.config("SET", "save", "");
    }
    expect(report.checks).toContainEqual(expect.objectContaining({ check: "appendonly", status: "fail" }));
    const own = ["clock", "scripts"];
    // Memory in use moves between the two looks; everything else is the same judgement.
    const comparable = (f: DoctorJson["findings"][number]) =>
      f.check === "memory" ? { ...f, detail: expect.any(String) } : f;
    expect(json.findings.filter((f) => !own.includes(f.check))).toEqual(report.checks.map(comparable));
    expect(json.findings.filter((f) => own.includes(f.check)).map((f) => f.check)).toEqual(own);
  });

  it("says when no Redis answers (exit 1)", async () => {
    const port = await freePort();
    const run = await runOnce(["doctor", "--redis-url", `redis://127.0.0.1:${port}`]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`cannot reach Redis at redis://127.0.0.1:${port}`);
  });

  it("runs against the shared Redis, its exit code agreeing with what it says", async () => {
    const run = await runOnce(["doctor", "--redis-url", redisUrl()]);
    expect([0, 1]).toContain(run.code);
    expect(run.stdout.includes("Problems that can cause duplicates")).toBe(run.code === 1);
  });
});

describe("doctor on a master with a replica", () => {
  let replica: RedisServerHandle;
  beforeAll(async () => {
    replica = await startRedisServer({ extraArgs: ["--replicaof", "127.0.0.1", String(server.port)] });
    for (let i = 0; i < 200 && !/slave0:.*state=online/.test(await admin.info("replication")); i++)
      await new Promise((resolve) => setTimeout(resolve, 50));
  }, 30_000);
  afterAll(async () => {
    await replica.stop();
  });
  const at = () => `127.0.0.1:${server.port}`;

  it("shows the replica and its lag, and warns that a failover can lose claims the store does not wait for", async () => {
    const run = await doctor();
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      new RegExp(
        `^${at()} +replicas +ok +1 connected \\(127\\.0\\.0\\.1:${replica.port} online, lag \\d+ s\\)`,
        "m",
      ),
    );
    expect(run.stdout).toMatch(new RegExp(`^${at()} +durability +WARN +replication is asynchronous`, "m"));
    expect(run.stdout).toMatch(new RegExp(`^${at()} +min-replicas-to-write +WARN +0: a master cut off`, "m"));
    expect(run.stdout).toContain("fix: durability: { replicas: 1, timeoutMs: 100 } on RedisStore.create");
  });

  it("--replicas 1 is met (exit 0); --replicas 2 is not: a problem naming both numbers, and the store would refuse", async () => {
    const met = await doctor("--replicas", "1");
    expect(met.code).toBe(0);
    expect(met.stdout).toMatch(
      new RegExp(`^${at()} +durability +ok +1 of 1 replicas confirm each transition`, "m"),
    );
    const unmet = await doctor("--replicas", "2");
    expect(unmet.code).toBe(1);
    expect(unmet.stdout).toContain(`durability.replicas is 2, but ${at()} has 1 replica connected`);
    expect(unmet.stdout).toContain("RedisStore.create would REFUSE this Redis (durability.replicas)");
    const bad = await doctor("--replicas", "0");
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('--replicas "0" must be an integer of at least 1');
  });
});
