// Puts one record in each state into a store, through RedisStore's own transitions (never by hand).

import { randomBytes } from "node:crypto";
import type { ClaimOutcome, OnceStore, Ownership, Phase, RecordState } from "@once/core";

export const RESULT = '{"chargeId":"ch_1","amount":1200}';

export function randomKey(): string {
  return randomBytes(32).toString("hex");
}

async function claim(store: OnceStore, key: string, tool: string, phase: Phase, leaseMs = 60_000) {
  const outcome: ClaimOutcome = await store.claim({ key, fingerprint: `fp-${key}`, tool, phase, leaseMs });
  if (!("token" in outcome)) throw new Error(`claim of ${key} gave ${outcome.outcome}`);
  return outcome as Ownership;
}

function ok(outcome: { outcome: string }, what: string): void {
  if (outcome.outcome !== "ok") throw new Error(`${what}: ${JSON.stringify(outcome)}`);
}

/** Creates a record of `tool` in `state` under a fresh key; returns the key. */
export async function seedRecord(
  store: OnceStore,
  state: RecordState,
  tool = "charge_card",
): Promise<string> {
  const key = randomKey();
  switch (state) {
    case "claimed":
      await claim(store, key, tool, "prepare");
      break;
    case "released": {
      const owner = await claim(store, key, tool, "prepare");
      ok(await store.release(key, owner.token), "release");
      break;
    }
    case "done": {
      const owner = await claim(store, key, tool, "effect");
      ok(await store.complete(key, owner.token, RESULT), "complete");
      break;
    }
    case "failed": {
      const owner = await claim(store, key, tool, "effect");
      const error = { name: "CardDeclined", message: "card declined", code: "card_declined" };
      ok(await store.failTerminal(key, owner.token, error), "failTerminal");
      break;
    }
    case "unknown": {
      const owner = await claim(store, key, tool, "effect");
      ok(
        await store.markUnknown(key, owner.token, { name: "TimeoutError", message: "socket timeout" }),
        "markUnknown",
      );
      break;
    }
    case "reconciling": {
      const owner = await claim(store, key, tool, "effect");
      ok(await store.markUnknown(key, owner.token), "markUnknown");
      await claim(store, key, tool, "effect");
      break;
    }
  }
  return key;
}

/** One record in every state; keys by state. */
export async function seedEveryState(
  store: OnceStore,
  tool = "charge_card",
): Promise<Record<RecordState, string>> {
  const states: RecordState[] = ["claimed", "reconciling", "released", "done", "failed", "unknown"];
  const keys = await Promise.all(states.map((state) => seedRecord(store, state, tool)));
  return Object.fromEntries(states.map((state, i) => [state, keys[i]])) as Record<RecordState, string>;
}
