export interface ResendOptions {
  /** The first wait for a call's answer; each later wait doubles, up to 8×. */
  timeoutMs: number;
  /** Each call as it starts (awaited before it is sent). */
  onCall?: (tool: string) => Promise<void> | void;
  /** Each re-send after a wait timed out (awaited before it is sent). */
  onResend?: (tool: string) => Promise<void> | void;
  /** A call that failed (the framework hands the error to the model, or ends the run). */
  onError?: (tool: string, error: unknown) => Promise<void> | void;
}

const TIMED_OUT = Symbol("timed out");

/**
 * The orchestrator's retry around one tool's calls, in whatever shape the framework calls a tool: wait
 * `timeoutMs` for the answer, and when none came, make the same call again (the same arguments, so the same
 * input and tool-call id) and wait twice as long. An attempt that timed out is abandoned, not cancelled — its
 * request may still be on its way to the provider, as a real one's is — and whichever attempt answers first
 * is the call's answer.
 */
export function resendOnTimeout<Args extends unknown[], Result>(
  name: string,
  call: (...args: Args) => Promise<Result> | Result,
  options: ResendOptions,
): (...args: Args) => Promise<Result> {
  return async (...args) => {
    await options.onCall?.(name);
    const attempts: Promise<Result>[] = [];
    let waitMs = options.timeoutMs;
    try {
      for (;;) {
        const attempt = Promise.resolve(call(...args));
        attempt.catch(() => {}); // an abandoned attempt's failure is nobody's to handle
        attempts.push(attempt);
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
          timer = setTimeout(() => resolve(TIMED_OUT), waitMs);
        });
        const answer = await Promise.race([...attempts, timeout]).finally(() => clearTimeout(timer));
        if (answer !== TIMED_OUT) return answer as Result;
        await options.onResend?.(name);
        waitMs = Math.min(waitMs * 2, options.timeoutMs * 8);
      }
    } catch (error) {
      await options.onError?.(name, error);
      throw error;
    }
  };
}
