import type { AnyTool, OnceRecord } from "@once/core";

/** How a call names its step, and how long its caller waits: the same for every entry point that takes calls. */
export interface CallOptions {
  taskId?: string;
  stepId?: string;
  namespace?: string;
  timeoutMs?: number;
  retries?: number;
}

/** Effect calls must name the step: the key is derived from it. */
export interface EffectCallOptions extends CallOptions {
  taskId: string;
  stepId: string;
  /**
   * The step's record as the caller read it before (a task's records, loaded at once on resume). A `done` one
   * for this call (its tool and fingerprint) is answered as its claim would answer it, a replay, with no round
   * trip; anything else is left to the claim as usual.
   */
  recorded?: OnceRecord;
}

export type CallOptionsFor<T extends AnyTool> = T["kind"] extends "effect" ? EffectCallOptions : CallOptions;

/**
 * Where an agent loop or an MCP server sends effect calls to run on workers instead of in its own process: a
 * queue's dispatcher (`@once/bullmq`'s `Dispatcher`). The engine and the adapters know it only by this shape,
 * so none of them depends on a queue.
 */
export interface EffectDispatcher {
  call(
    tool: AnyTool,
    input: never,
    options: EffectCallOptions,
  ): Promise<{ result: unknown; replayed: boolean }>;
}
