import { z } from "zod";
import { chaosStoreLocation } from "./chaos-store.js";
import { redisTarget } from "./redis-target.js";

/** The timings every run uses. Aggressive on purpose: the dispatcher gives up on a wait after 150 ms. */
export const CHAOS_TIMING = {
  workers: 4,
  workerConcurrency: 8,
  leaseMs: 1_500,
  lockDurationMs: 1_500,
  stalledIntervalMs: 1_000,
  storeTimeoutMs: 1_000,
  /** The tools' own deadline on one provider call; past it the outcome is unknown. */
  providerTimeoutMs: 1_000,
  dispatchTimeoutMs: 150,
  dispatchRetries: 1,
  jobAttempts: 8,
  jobBackoffMs: 100,
  orchestratorConcurrency: 64,
  /** Heavy-tailed: the median answer takes 80 ms, one in a hundred 2 s or more. */
  latency: { p50Ms: 80, p99Ms: 2_000 },
  /** A freeze outlasts the lease, BullMQ's lock and two stalled checks, so another worker takes over. */
  freezeMinMs: 5_000,
  freezeMaxMs: 7_000,
  /**
   * How long a replica has to confirm a transition when a run asks for durability (a settle asks again
   * while the store's 1 s allow).
   */
  durabilityTimeoutMs: 300,
} as const;

/** A chaos worker process's settings, as JSON in CHAOS_WORKER_CONFIG. */
export const chaosWorkerConfig = z.object({
  name: z.string(),
  /** Redis as the worker reaches it: through the suite's TCP proxies. */
  redis: redisTarget,
  queueName: z.string(),
  queuePrefix: z.string(),
  storePrefix: z.string(),
  /** Where the records are: the run's Redis (under storePrefix), or its PostgreSQL. */
  store: chaosStoreLocation,
  paymentsUrl: z.string(),
  leaseMs: z.number().int().positive(),
  lockDurationMs: z.number().int().positive(),
  stalledIntervalMs: z.number().int().positive(),
  concurrency: z.number().int().positive(),
  storeTimeoutMs: z.number().int().positive(),
  providerTimeoutMs: z.number().int().positive(),
  transport: z.enum(["guarded", "fetch"]),
  /** RedisStore's `durability`: each transition before an effect, and each settle, on this many replicas. */
  durability: z
    .object({ replicas: z.number().int().positive(), timeoutMs: z.number().int().positive() })
    .optional(),
});
export type ChaosWorkerConfig = z.infer<typeof chaosWorkerConfig>;
export const CHAOS_WORKER_CONFIG_ENV = "CHAOS_WORKER_CONFIG";

/** The orchestrator process's settings, as JSON in CHAOS_ORCHESTRATOR_CONFIG. */
export const chaosOrchestratorConfig = z.object({
  /** Through the suite's TCP proxies (its own, not the workers'). */
  redis: redisTarget,
  queueName: z.string(),
  queuePrefix: z.string(),
  storePrefix: z.string(),
  store: chaosStoreLocation,
  /** Written before the first dispatch; a restarted orchestrator reads it back. */
  planFile: z.string(),
  /** One JSON line per settled call, appended as calls settle. */
  progressFile: z.string(),
  /** The suite creates it when the faults are over: the orchestrator's last audit waits for it. */
  faultsOverFile: z.string(),
  seed: z.number().int().nonnegative(),
  calls: z.number().int().positive(),
  /** Calls started per second, so that the faults fall across the whole run. */
  rate: z.number().positive(),
  /** Calls in flight at most. */
  concurrency: z.number().int().positive(),
  /** The dispatcher's wait for one enqueue: aggressive on purpose. */
  timeoutMs: z.number().int().positive(),
  retries: z.number().int().nonnegative(),
  jobAttempts: z.number().int().positive(),
  jobBackoffMs: z.number().int().positive(),
  leaseMs: z.number().int().positive(),
  lockDurationMs: z.number().int().positive(),
  stalledIntervalMs: z.number().int().positive(),
});
export type ChaosOrchestratorConfig = z.infer<typeof chaosOrchestratorConfig>;
export const CHAOS_ORCHESTRATOR_CONFIG_ENV = "CHAOS_ORCHESTRATOR_CONFIG";
