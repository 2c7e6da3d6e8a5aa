/** A call waiting for the store's server: when it must have answered by, and how to fail it. */
interface Pending {
  deadline: number;
  fail(): void;
}

// Every store call waits with a deadline, and nearly all answer long before it: one shared sweep over the
// waiting calls costs less than a timer made and cleared per call. It runs every tenth of the shortest
// timeout in use, so a call fails at most that much after its own timeout.
const waiting = new Set<Pending>();
let sweeper: ReturnType<typeof setInterval> | undefined;
let period = Number.POSITIVE_INFINITY;

function sweep(): void {
  const now = performance.now();
  for (const call of waiting) {
    if (call.deadline > now) continue;
    waiting.delete(call);
    call.fail();
  }
  if (waiting.size === 0) {
    clearInterval(sweeper);
    sweeper = undefined;
    period = Number.POSITIVE_INFINITY;
  }
}

/**
 * Settles like `promise`, or rejects about `timeoutMs` later (at most a tenth more) with
 * `<server> did not answer within <timeoutMs> ms` when it has not settled: a client that queues commands while
 * its server is unreachable would otherwise wait for every reconnection attempt, and a store must fail closed
 * (the caller turns the rejection into StoreUnavailableError). `promise` itself is not cancelled: the command
 * may still reach the server later, which leases make safe.
 */
export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, server = "the store"): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const call: Pending = {
      deadline: performance.now() + timeoutMs,
      fail: () => reject(new Error(`${server} did not answer within ${timeoutMs} ms`)),
    };
    waiting.add(call);
    const tick = Math.max(1, Math.ceil(timeoutMs / 10));
    if (tick < period) {
      clearInterval(sweeper);
      period = tick;
      sweeper = setInterval(sweep, tick);
    }
    promise.then(
      (value) => {
        waiting.delete(call);
        resolve(value);
      },
      (error: unknown) => {
        waiting.delete(call);
        reject(error);
      },
    );
  });
}
