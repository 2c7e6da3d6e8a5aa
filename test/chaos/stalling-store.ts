import type { ClaimRequest, OnceStore } from "@once/core";
import { wrapStore } from "@once/core/store-kit";

/**
 * A real store whose `claim` answers late: what a worker process sees when it is frozen (SIGSTOP, a long
 * GC pause, a starved CPU) after Redis granted its claim and before its event loop read the reply.
 */
export function stallingStore(inner: OnceStore, options: { claimMs: number }): OnceStore {
  return wrapStore(inner, {
    async claim(request: ClaimRequest) {
      const outcome = await inner.claim(request);
      await new Promise((resolve) => setTimeout(resolve, options.claimMs));
      return outcome;
    },
  });
}
