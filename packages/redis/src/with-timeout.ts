/** A call waiting for Redis: when it must have answered by, and how to fail it. */
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
 * Settles like `promise`, or rejects about `timeoutMs` later (at most a tenth more) when Redis has not
 * answered: with ioredis' offline queue a command to an unreachable server would otherwise wait for every
 * reconnection attempt.
 */
export function withTimeout<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const call: Pending = {
      deadline: performance.now() + timeoutMs,
      fail: () => reject(new Error(`Redis did not answer within ${timeoutMs} ms`)),
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
