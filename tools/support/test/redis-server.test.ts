import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  freePort,
  MissingRedisServerError,
  pingRedis,
  portIsFree,
  redisCommand,
  startRedisServer,
  stopAllRedisServers,
} from "../src/index.js";

afterAll(() => stopAllRedisServers());

describe("startRedisServer", () => {
  it("starts a child redis-server on a free port that answers PING, and stops it", async () => {
    const server = await startRedisServer({ appendonly: true });
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
    expect(server.running).toBe(true);
    expect(await pingRedis("127.0.0.1", server.port)).toBe(true);
    const info = await redisCommand("127.0.0.1", server.port, ["INFO", "persistence"]);
    expect(info).toMatch(/^aof_enabled:1\r$/m);
    expect(await redisCommand("127.0.0.1", server.port, ["CONFIG", "GET", "nothing"]).catch(String)).toMatch(
      /unexpected RESP reply type "\*"/,
    );
    await server.kill();
    expect(server.running).toBe(false);
    await server.restart();
    expect(await pingRedis("127.0.0.1", server.port)).toBe(true);
    await server.stop();
    expect(server.pid).toBe(0);
    expect(await pingRedis("127.0.0.1", server.port)).toBe(false);
  });

  it("starts a daemonized one that outlives its starter, with its pid from the pid file", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "once-support-test-"));
    try {
      const server = await startRedisServer({ port: await freePort(), dir, detached: true });
      expect(server.pid).toBeGreaterThan(0);
      expect(await redisCommand("127.0.0.1", server.port, ["INFO", "server"])).toContain(
        `process_id:${server.pid}`,
      );
      await server.stop();
      expect(server.running).toBe(false);
      expect(await portIsFree(server.port)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("says how to install Redis when the binary is missing", async () => {
    await expect(startRedisServer({ bin: "/nonexistent/redis-server" })).rejects.toThrow(
      MissingRedisServerError,
    );
  });

  it("answers no PING where nothing listens", async () => {
    expect(await pingRedis("127.0.0.1", await freePort())).toBe(false);
  });
});
