// What a drained run left behind, gathered in one place for the judge: the plan and the orchestrator's
// journal, the provider's ledger, the store's records, and what the processes printed — with the grants of
// ownership and the accepted owner writes picked out of the workers' events.

import { readFileSync } from "node:fs";
import { type Charge, type Email, PaymentsClient, type Ticket } from "@once/payments";
import type { ChaosChild } from "./chaos-child.js";
import type { ChaosFleet, WorkerEvent } from "./chaos-fleet.js";
import { type ChaosPlan, readProgress, type SettledCall } from "./chaos-plan.js";
import { snapshotPostgresRecords } from "./chaos-store.js";
import type { ChaosWorld } from "./chaos-world.js";
import { GRANTS } from "./reporting-store.js";
import type { RoleChange } from "./role-watch.js";
import { type RecordState, snapshotRecords } from "./store-records.js";

/** One side effect in the provider's ledger. */
export type Effect = Charge | Email | Ticket;

/** A grant of a key's ownership under fence `f`, `at` the moment its worker read the answer. */
export interface Grant {
  f: number;
  at: number;
}

/** An owner write Redis accepted: owner `f` of key `k`, `sent` when its worker sent it. */
export interface AcceptedWrite {
  k: string;
  f: number;
  sent: number;
  op: string;
  /** The worker that wrote it. */
  who: string;
}

export interface Evidence {
  plan: ChaosPlan;
  /** How each call ended, as the orchestrator wrote it down. */
  progress: Map<number, SettledCall>;
  /** Every effect the provider performed: the charges, then the tickets, then the emails. */
  effects: Effect[];
  /** The same by order. Every call has an order of its own: an order's effects are its call's. */
  effectsByOrder: Map<string, Effect[]>;
  /** The store's records at the end (key without the prefix), with their results. */
  records: Map<string, RecordState>;
  /** Every process the run started, in the order they came up, and the orchestrators among them. */
  children: readonly ChaosChild[];
  orchestrators: readonly ChaosChild[];
  workerEvents: WorkerEvent[];
  /** Every grant of ownership, key by key, as the workers saw them. */
  grantsByKey: Map<string, Grant[]>;
  writesOk: AcceptedWrite[];
  /** Every change of a data node's role the suite saw (replicated topologies). */
  roleChanges: readonly RoleChange[];
}

/** Gathers the evidence of a drained run whose workers are stopped. */
export async function collectEvidence(world: ChaosWorld, fleet: ChaosFleet): Promise<Evidence> {
  const plan = JSON.parse(readFileSync(world.planFile, "utf8")) as ChaosPlan;
  const progress = readProgress(world.progressFile);
  const provider = new PaymentsClient(world.payments.url);
  const [charges, tickets, emails] = await Promise.all([
    provider.findCharges({}),
    provider.findTickets({}),
    provider.findEmails({}),
  ]);
  const effects: Effect[] = [...charges, ...tickets, ...emails];
  const effectsByOrder = new Map<string, Effect[]>();
  for (const effect of effects) {
    const list = effectsByOrder.get(effect.orderId) ?? [];
    list.push(effect);
    effectsByOrder.set(effect.orderId, list);
  }
  const records = world.postgres
    ? await snapshotPostgresRecords(world.postgres.server.url, world.postgres.schema, true)
    : await snapshotRecords(await world.redis.masters(), world.storePrefix, true);

  const workerEvents = fleet.workerEvents();
  const grantsByKey = new Map<string, Grant[]>();
  const writesOk: AcceptedWrite[] = [];
  for (const { child, event } of workerEvents) {
    if (event.e !== "s") continue;
    const k = String(event.k);
    if (event.op === "claim" && GRANTS.has(String(event.o))) {
      const list = grantsByKey.get(k) ?? [];
      list.push({ f: Number(event.f), at: event.at });
      grantsByKey.set(k, list);
    } else if (event.op !== "claim" && event.r === "ok") {
      writesOk.push({
        k,
        f: Number(event.f),
        sent: Number(event.sent),
        op: String(event.op),
        who: child.name,
      });
    }
  }
  return {
    plan,
    progress,
    effects,
    effectsByOrder,
    records,
    children: fleet.children,
    orchestrators: fleet.orchestrators,
    workerEvents,
    grantsByKey,
    writesOk,
    roleChanges: world.roles?.changes ?? [],
  };
}
