import type { ClaimRequest, OnceStore, WriteOutcome } from "@once/core";
import { wrapStore } from "@once/core/store-kit";

/** One acknowledged store transition, as a worker saw it. `f` is the owner's fence. */
export type StoreReport =
  | { op: "claim"; k: string; o: string; f?: number; ph?: string; sent: number }
  | { op: OwnerWrite; k: string; f: number; r: WriteOutcome["outcome"]; sent: number };

export type OwnerWrite =
  | "beginEffect"
  | "complete"
  | "failTerminal"
  | "release"
  | "markUnknown"
  | "heartbeat"
  | "resolveApplied"
  | "resolveNotApplied"
  | "giveUp";

/** The claim outcomes that make the claimer the key's owner, under a fence of its own. */
export const GRANTS: ReadonlySet<string> = new Set(["acquired", "takeover", "reconcile"]);

/** The owner writes that end its hold on the key: after one, the owner has nothing left to do there. */
export const FINAL_WRITES: ReadonlySet<string> = new Set<OwnerWrite>([
  "complete",
  "failTerminal",
  "markUnknown",
  "release",
  "resolveApplied",
  "giveUp",
]);

function fenceOf(token: string): number {
  return Number(token.slice(0, token.indexOf(".")));
}

/**
 * The worker's RedisStore, reporting every transition Redis acknowledged (heartbeats only when refused),
 * with when it was sent (`sent`) and when its answer was read (the event's `at`): Redis executed it in
 * between. The suite compares them with what Redis still holds after a restart, and checks the fencing.
 */
export function reportingStore(inner: OnceStore, report: (entry: StoreReport) => void): OnceStore {
  async function write(
    op: OwnerWrite,
    key: string,
    token: string,
    send: () => Promise<WriteOutcome>,
  ): Promise<WriteOutcome> {
    const sent = Date.now();
    const outcome = await send();
    if (op !== "heartbeat" || outcome.outcome !== "ok") {
      report({ op, k: key, f: fenceOf(token), r: outcome.outcome, sent });
    }
    return outcome;
  }
  // Everything else is the store's own: its liveness entries among them, which the workers keep as any do.
  return wrapStore(inner, {
    async claim(request: ClaimRequest) {
      const sent = Date.now();
      const outcome = await inner.claim(request);
      report({
        sent,
        op: "claim",
        k: request.key,
        o: outcome.outcome,
        ...("fence" in outcome ? { f: outcome.fence } : {}),
        ...(outcome.outcome === "acquired" || outcome.outcome === "takeover" ? { ph: request.phase } : {}),
      });
      return outcome;
    },
    beginEffect: (key, token) => write("beginEffect", key, token, () => inner.beginEffect(key, token)),
    complete: (key, token, result) => write("complete", key, token, () => inner.complete(key, token, result)),
    failTerminal: (key, token, error) =>
      write("failTerminal", key, token, () => inner.failTerminal(key, token, error)),
    release: (key, token, options) => write("release", key, token, () => inner.release(key, token, options)),
    markUnknown: (key, token, error) =>
      write("markUnknown", key, token, () => inner.markUnknown(key, token, error)),
    heartbeat: (key, token, leaseMs) =>
      write("heartbeat", key, token, () => inner.heartbeat(key, token, leaseMs)),
    resolveApplied: (key, token, result) =>
      write("resolveApplied", key, token, () => inner.resolveApplied(key, token, result)),
    resolveNotApplied: (key, token) =>
      write("resolveNotApplied", key, token, () => inner.resolveNotApplied(key, token)),
    giveUp: (key, token, error) => write("giveUp", key, token, () => inner.giveUp(key, token, error)),
  });
}
