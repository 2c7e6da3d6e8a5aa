/**
 * Settles like `promise`, or rejects after `timeoutMs` when Redis has not answered: with ioredis' offline
 * queue a command to an unreachable server would otherwise wait for every reconnection attempt. One promise
 * and one timer per call (every store call goes through here).
 */
export function withTimeout<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`Redis did not answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
