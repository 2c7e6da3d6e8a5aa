// Records put into a store through its own transitions (never written by hand), for the console to show.

import { randomBytes } from "node:crypto";
import type { OnceStore, Ownership, Phase, StoredError } from "@once/core";

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
