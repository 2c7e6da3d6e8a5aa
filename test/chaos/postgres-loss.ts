// What a restart of the store's PostgreSQL costs: the suite crashes the server (pg_ctl stop -m immediate: no
// checkpoint, the WAL replayed on start), starts it again, and before any client is let back in compares
// what it kept with every transition the workers saw it acknowledge before the crash.

import type { ChaosChild } from "./chaos-child.js";
import { snapshotPostgresRecords } from "./chaos-store.js";
import type { ChaosWorld } from "./chaos-world.js";
import { compareWithAcks, type RedisLoss } from "./redis-loss.js";

export async function restartPostgres(
  world: ChaosWorld,
  children: readonly ChaosChild[],
  t0: number,
): Promise<RedisLoss> {
  const postgres = world.postgres;
  if (!postgres) throw new Error("restart-postgres in a run whose store is not on PostgreSQL");
  const proxies = [postgres.workerProxy, postgres.orchestratorProxy];
  for (const proxy of proxies) proxy.refuse(true);
  const before = await snapshotPostgresRecords(postgres.server.url, postgres.schema).catch(() => undefined);
  const killAt = Date.now();
  for (const proxy of proxies) proxy.cut();
  const { downMs } = await postgres.server.restart("immediate");
  const snapshot = await snapshotPostgresRecords(postgres.server.url, postgres.schema);
  for (const proxy of proxies) proxy.refuse(false);
  const loss = compareWithAcks(children, snapshot, killAt);
  return {
    server: "postgres",
    at: killAt - t0,
    kind: "restart-postgres",
    killed: "the store's PostgreSQL",
    serving: "the store's PostgreSQL (restarted)",
    downMs,
    recordsBefore: before?.size ?? -1,
    recordsAfter: snapshot.size,
    lostKeys: loss.lostKeys,
    goneKeys: loss.gone,
    acked: loss.acked,
  };
}
