// What the dispatcher reads of BullMQ's insides, in one place: the backend a queue was built with, and where
// each backend keeps its events (the Redis stream, the PostgreSQL backend's event table). BullMQ documents
// none of it; test/queue-backend.test.ts pins the shape on both backends, so an upgrade that moves it fails
// there, not in production.

import type { BackendFactory, IQueueBackend, Queue } from "bullmq";

/** A queue on any of BullMQ's backends (Redis by default, or PostgreSQL), with any connection options. */
// biome-ignore lint/suspicious/noExplicitAny: the connection options differ by backend; only the queue's own methods are used.
export type AnyQueue = Queue<any, any, string, any, any, string, IQueueBackend, any>;

/** The backend factory the queue was built with (BullMQ's Redis one unless another was given). */
export function backendFactoryOf(queue: AnyQueue): BackendFactory | undefined {
  return (queue as unknown as { backendFactory?: BackendFactory }).backendFactory;
}

/**
 * The id of the newest event of the queue: on Redis from its stream, read on the queue's own connection when
 * it is a client; on BullMQ's PostgreSQL backend from its event table, on the backend's pool.
 */
export async function lastEventId(queue: AnyQueue): Promise<{ lastEventId?: string }> {
  const postgres = (queue.backend as { connection?: { pool?: unknown; schema?: unknown } } | undefined)
    ?.connection;
  if (postgres && typeof postgres.schema === "string" && isQueryable(postgres.pool)) {
    await queue.waitUntilReady();
    const { rows } = await postgres.pool.query<{ max: string }>(
      `select coalesce(max(id), 0)::bigint as max from "${postgres.schema.replaceAll('"', '""')}".event where queue = $1`,
      [queue.name],
    );
    return { lastEventId: String(rows[0]?.max ?? "0") };
  }
  const client = queue.opts.connection as {
    xrevrange?: (key: string, end: string, start: string, count: "COUNT", n: number) => Promise<[string][]>;
  };
  if (typeof client.xrevrange !== "function") return {};
  const [newest] = await client.xrevrange(queue.toKey("events"), "+", "-", "COUNT", 1);
  return { lastEventId: newest?.[0] ?? "0-0" };
}

interface Queryable {
  query<R>(text: string, values: unknown[]): Promise<{ rows: R[] }>;
}

function isQueryable(value: unknown): value is Queryable {
  return typeof (value as Partial<Queryable> | undefined)?.query === "function";
}
