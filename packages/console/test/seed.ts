// Records put into a store through its own transitions (never written by hand), for the console to show.

import { randomBytes } from "node:crypto";
import {
  type ApprovalStore,
  deriveKey,
  type OnceStore,
  type Ownership,
  type Phase,
  type StoredError,
} from "@once/core";

export function randomKey(): string {
  return randomBytes(32).toString("hex");
}

/** A W3C traceparent with a random trace id, as a worker's attempt stores it. */
export function randomTraceparent(): string {
  return `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-01`;
}

interface Seed {
  tool: string;
  key?: string;
  trace?: string;
  leaseMs?: number;
}

async function claim(store: OnceStore, seed: Seed, phase: Phase = "effect"): Promise<[string, Ownership]> {
  const key = seed.key ?? randomKey();
  const outcome = await store.claim({
    key,
    fingerprint: `fp-${key.slice(0, 16)}`,
    tool: seed.tool,
    phase,
    leaseMs: seed.leaseMs ?? 60_000,
    ...(seed.trace === undefined ? {} : { trace: seed.trace }),
  });
  if (!("token" in outcome)) throw new Error(`claim of ${key} gave ${outcome.outcome}`);
  return [key, outcome];
}

function ok(outcome: { outcome: string }, what: string): void {
  if (outcome.outcome !== "ok") throw new Error(`${what}: ${JSON.stringify(outcome)}`);
}

export async function seedDone(store: OnceStore, seed: Seed, result: unknown): Promise<string> {
  const [key, owner] = await claim(store, seed);
  ok(await store.complete(key, owner.token, JSON.stringify(result)), "complete");
  return key;
}

export async function seedFailed(store: OnceStore, seed: Seed, error: StoredError): Promise<string> {
  const [key, owner] = await claim(store, seed);
  ok(await store.failTerminal(key, owner.token, error), "failTerminal");
  return key;
}

export async function seedUnknown(store: OnceStore, seed: Seed, error: StoredError): Promise<string> {
  const [key, owner] = await claim(store, seed);
  ok(await store.markUnknown(key, owner.token, error), "markUnknown");
  return key;
}

export async function seedClaimed(store: OnceStore, seed: Seed): Promise<string> {
  const [key] = await claim(store, seed);
  return key;
}

export async function seedReconciling(store: OnceStore, seed: Seed): Promise<string> {
  const [key, owner] = await claim(store, seed);
  ok(await store.markUnknown(key, owner.token), "markUnknown");
  await claim(store, { ...seed, key });
  return key;
}

export async function seedReleased(store: OnceStore, seed: Seed): Promise<string> {
  const [key, owner] = await claim(store, seed, "prepare");
  ok(await store.release(key, owner.token), "release");
  return key;
}

/** A call whose tool's policy asked a person: claimed, then given up to wait for approval. */
export async function seedAwaitingApproval(
  store: ApprovalStore,
  seed: Seed & { reason: string; ttlMs?: number },
): Promise<string> {
  const [key, owner] = await claim(store, seed, "prepare");
  ok(
    await store.requestApproval(key, owner.token, { reason: seed.reason, ttlMs: seed.ttlMs ?? 10 * 60_000 }),
    "requestApproval",
  );
  return key;
}

/** One task's calls, by step, in the order they were claimed. */
export interface SeededTask {
  namespace: string;
  taskId: string;
  keys: { search: string; refund: string; charge: string; email: string };
}

/**
 * One task of four calls, each claimed with its task: a search done (with a trace), a refund waiting for
 * approval, a charge whose effect is under way, an email released before its effect.
 */
export async function seedTask(
  store: ApprovalStore,
  task: { namespace: string; taskId: string; trace?: string },
): Promise<SeededTask> {
  const claimStep = async (stepId: string, tool: string, phase: Phase, trace?: string) => {
    const identity = { namespace: task.namespace, taskId: task.taskId, stepId };
    const key = deriveKey(identity);
    const outcome = await store.claim({
      key,
      fingerprint: `fp-${stepId}`,
      tool,
      phase,
      leaseMs: 10 * 60_000,
      task: identity,
      ...(trace === undefined ? {} : { trace }),
    });
    if (!("token" in outcome)) throw new Error(`claim of ${stepId} gave ${outcome.outcome}`);
    return { key, token: outcome.token };
  };
  const search = await claimStep("search", "search_flights", "effect", task.trace);
  ok(await store.complete(search.key, search.token, JSON.stringify({ flights: 3 })), "complete");
  const refund = await claimStep("refund", "refund_order", "prepare");
  ok(
    await store.requestApproval(refund.key, refund.token, {
      reason: "refund over 100 EUR",
      ttlMs: 10 * 60_000,
    }),
    "requestApproval",
  );
  const charge = await claimStep("charge", "charge_card", "effect");
  const email = await claimStep("email", "send_email", "prepare");
  ok(await store.release(email.key, email.token), "release");
  return {
    ...task,
    keys: { search: search.key, refund: refund.key, charge: charge.key, email: email.key },
  };
}
