import { pingRedis } from "@once/support";
import { describe, expect, it } from "vitest";
import { findRedis, NoRedisError } from "../src/index.js";

// A port nothing listens on (the discard port): stands in for "no Redis on the default address".
const CLOSED_PORT = 9;

describe("findRedis", () => {
  it("uses REDIS_URL when it is set and answers", async () => {
    const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
    const found = await findRedis({ env: { REDIS_URL: url } });
    expect(found).toMatchObject({ url, source: "REDIS_URL" });
    await found.stop();
  });

  it("refuses a REDIS_URL that does not answer", async () => {
    await expect(findRedis({ env: { REDIS_URL: `redis://127.0.0.1:${CLOSED_PORT}` } })).rejects.toThrow(
      NoRedisError,
    );
  });

  it("starts a throwaway redis-server when nothing answers, and stops it", async () => {
    const found = await findRedis({ env: {}, defaultPort: CLOSED_PORT });
    expect(found.source).toBe("throwaway redis-server");
    const port = Number(new URL(found.url).port);
    expect(await pingRedis("127.0.0.1", port)).toBe(true);
    await found.stop();
    expect(await pingRedis("127.0.0.1", port)).toBe(false);
  });

  it("names docker compose when there is no redis-server to start", async () => {
    const found = findRedis({
      env: { REDIS_SERVER_BIN: "/nonexistent/redis-server" },
      defaultPort: CLOSED_PORT,
    });
    await expect(found).rejects.toThrow(/docker compose up -d redis/);
  });
});
