// What the dispatcher reads of BullMQ's insides (src/queue-backend.ts) is not BullMQ's public API: where each
// backend keeps its events, and which backend a queue was built with. Pinned here on both backends, so an
// upgrade of BullMQ that moves any of it fails this test instead of a dispatcher that waits for an answer
// that already came.

import { cleanupPrefix, postgresUrl, randomPrefix, randomSchema, redisUrl } from "@once/support";
import { createPostgresBackend, Queue } from "bullmq";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { backendFactoryOf, lastEventId } from "../src/queue-backend.js";

describe("BullMQ's backends, as the dispatcher reads them", () => {
  const prefix = randomPrefix("queue-backend");
  const schema = randomSchema("queue_backend");
  const redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  const pool = new pg.Pool({ connectionString: postgresUrl(), max: 2 });

  afterAll(async () => {
    await cleanupPrefix(redis, prefix);
    redis.disconnect();
    await pool.query(`drop schema if exists "${schema}" cascade`);
    await pool.end();
  });

  it("Redis: events in a stream at toKey('events'); the newest id is the stream's last", async () => {
    const queue = new Queue("pinned", { connection: redis, prefix });
    try {
      // BullMQ's default factory, which QueueEvents takes as it is.
      expect(typeof backendFactoryOf(queue)).toBe("function");
      expect(backendFactoryOf(queue)).not.toBe(createPostgresBackend);
      expect(await lastEventId(queue)).toEqual({ lastEventId: "0-0" });
      await queue.add("x", {}, { jobId: "job-1" });
      const [newest] = await redis.xrevrange(queue.toKey("events"), "+", "-", "COUNT", 1);
      expect(newest?.[0]).toMatch(/^\d+-\d+$/);
      expect(await lastEventId(queue)).toEqual({ lastEventId: newest?.[0] });
    } finally {
      await queue.close();
    }
  });

  it("PostgreSQL: the backend's pool and schema on queue.backend.connection, events in <schema>.event", async () => {
    const queue = new Queue(
      "pinned",
      { connection: { connectionString: postgresUrl(), schema, migrate: true } },
      createPostgresBackend,
    );
    try {
      await queue.waitUntilReady();
      expect(backendFactoryOf(queue)).toBe(createPostgresBackend);
      const connection = (queue.backend as unknown as { connection: { pool: pg.Pool; schema: string } })
        .connection;
      expect(connection.schema).toBe(schema);
      expect(typeof connection.pool.query).toBe("function");
      const columns = await pool.query<{ column_name: string }>(
        "select column_name from information_schema.columns where table_schema = $1 and table_name = 'event'",
        [schema],
      );
      expect(columns.rows.map((r) => r.column_name)).toEqual(expect.arrayContaining(["id", "queue"]));
      const before = await lastEventId(queue);
      await queue.add("x", {}, { jobId: "job-1" });
      const { rows } = await pool.query<{ max: string }>(
        `select max(id)::text as max from "${schema}".event where queue = $1`,
        ["pinned"],
      );
      expect(rows[0]?.max).not.toBe(before.lastEventId);
      expect(await lastEventId(queue)).toEqual({ lastEventId: rows[0]?.max });
    } finally {
      await queue.close();
    }
  });
});
