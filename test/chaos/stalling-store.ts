import type { OnceStore } from "@once/core";

/**
 * A real store whose `claim` answers late: what a worker process sees when it is frozen (SIGSTOP, a long
 * GC pause, a starved CPU) after Redis granted its claim and before its event loop read the reply.
 */
export function stallingStore(inner: OnceStore, options: { claimMs: number }): OnceStore {
  return {
    get retentionMs() {
      return inner.retentionMs;
    },
    async claim(request) {
      const outcome = await inner.claim(request);
      await new Promise((resolve) => setTimeout(resolve, options.claimMs));
      return outcome;
    },
    beginEffect: (key, token) => inner.beginEffect(key, token),
    complete: (key, token, result) => inner.complete(key, token, result),
    failTerminal: (key, token, error) => inner.failTerminal(key, token, error),
    release: (key, token, o) => inner.release(key, token, o),
    markUnknown: (key, token, error) => inner.markUnknown(key, token, error),
    heartbeat: (key, token, leaseMs) => inner.heartbeat(key, token, leaseMs),
    resolveApplied: (key, token, result) => inner.resolveApplied(key, token, result),
    resolveNotApplied: (key, token) => inner.resolveNotApplied(key, token),
    giveUp: (key, token, error) => inner.giveUp(key, token, error),
    resolve: (key, request) => inner.resolve(key, request),
    get: (key) => inner.get(key),
  };
}
