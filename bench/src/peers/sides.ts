import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort } from "@once/support";
import pg from "pg";
import type { BenchContext } from "../bench-context.js";
import type { ChildConfig, PeerSide } from "./protocol.js";
import { EFFECTS_TABLE } from "./runners/effects-table.js";
import { buildWorkflow, createDatabase, startRestate } from "./servers.js";

/** What a user must run beside their code for each side, as the tables say it. */
export const REQUIRES: Record<PeerSide, string> = {
  bare: "nothing (no engine: a crash loses track of the task)",
  "once-redis": "Redis",
  "once-postgres": "PostgreSQL",
  "once-bullmq": "Redis (BullMQ and the store), worker processes",
  "once-transactional": "PostgreSQL (the effect is a row in the store's database)",
  dbos: "PostgreSQL (DBOS's system database)",
  restate: "restate-server (a Rust binary with its own storage), the service as an HTTP/2 endpoint",
  workflow: "the DevKit's build step (`workflow build`); the local world keeps runs in JSON files",
};

/** Where one side runs for one cost run or one kill run: its settings for the child, and what to tear down. */
export interface SideEnvironment {
  config: Partial<ChildConfig>;
  /** Effects made per order id, for a side whose effects are not at the provider (the transactional step). */
  effects?(): Promise<Map<string, number>>;
  cleanup(): Promise<void>;
}

/** What the sides share for the whole section: the bench's Redis, one PostgreSQL server, one DevKit build. */
export interface PeerServers {
  ctx: BenchContext;
  postgresUrl: string;
  /** The DevKit's bundles, built once when its side first runs. */
  workflowBuild(): Promise<string>;
}

export function peerServers(ctx: BenchContext, postgresUrl: string): PeerServers {
  let build: Promise<string> | undefined;
  return { ctx, postgresUrl, workflowBuild: () => (build ??= buildWorkflow()) };
}

/**
 * Sets up what `side` needs, fresh for each run (a database, a restate-server, a data directory): no side
 * inherits another run's history. Throws with the reason when it cannot (the side is then "not run").
 */
export async function prepareSide(
  servers: PeerServers,
  side: PeerSide,
  tag: string,
): Promise<SideEnvironment> {
  const { ctx } = servers;
  const redis = { host: ctx.target.host, port: ctx.target.port, prefix: `${ctx.prefix}peers:${tag}:` };
  switch (side) {
    case "bare":
      return { config: {}, cleanup: async () => {} };
    case "once-redis":
      return { config: { redis }, cleanup: async () => {} };
    case "once-bullmq":
      return {
        config: { redis, bullmq: { queueName: `peers-${tag}`, prefix: `${ctx.prefix}peersbull` } },
        cleanup: async () => {},
      };
    case "once-postgres":
    case "once-transactional":
    case "dbos": {
      const db = await createDatabase(servers.postgresUrl, side);
      return {
        config: { postgres: { url: db.url, database: db.database } },
        ...(side === "once-transactional" ? { effects: () => countEffects(db.url) } : {}),
        cleanup: () => db.drop(),
      };
    }
    case "restate": {
      const server = await startRestate();
      const endpointPort = await freePort();
      return {
        config: {
          restate: {
            ingressUrl: server.ingressUrl,
            adminUrl: server.adminUrl,
            endpointPort,
            serverPid: server.pid,
            register: true,
          },
        },
        cleanup: () => server.stop(),
      };
    }
    case "workflow": {
      const buildDir = await servers.workflowBuild();
      const dataDir = mkdtempSync(path.join(os.tmpdir(), "peers-workflow-"));
      return {
        config: { workflow: { buildDir, dataDir, port: await freePort() } },
        cleanup: async () => rmSync(dataDir, { recursive: true, force: true }),
      };
    }
  }
}

/** The transactional step's effects: rows of the effects table, per order id. */
async function countEffects(url: string): Promise<Map<string, number>> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => {});
  await client.connect();
  try {
    const { rows } = await client.query<{ order_id: string; n: string }>(
      `select order_id, count(*) as n from ${EFFECTS_TABLE} group by order_id`,
    );
    return new Map(rows.map((r) => [r.order_id, Number(r.n)]));
  } catch (error) {
    // No table: no step ever ran.
    if ((error as { code?: string }).code === "42P01") return new Map();
    throw error;
  } finally {
    await client.end().catch(() => {});
  }
}
