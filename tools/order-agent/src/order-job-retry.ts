/**
 * How order-agent jobs are retried by BullMQ: the orchestrator enqueues with it and the worker checks the
 * retry window against it. A few attempts with a short exponential backoff: a failed `run` whose outcome
 * is unknown gets its next attempt quickly, and that attempt reconciles instead of firing again.
 */
export const ORDER_JOB_RETRY = {
  attempts: 5,
  backoff: { type: "exponential" as const, delay: 200 },
};
