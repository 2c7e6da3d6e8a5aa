import type { createCallProcessor } from "@once/bullmq";
import type { RedisStore } from "@once/redis";
import type { Redis } from "ioredis";
import type { BenchOptions } from "./bench-options.js";
import type { RedisTarget } from "./redis-target.js";

/** One build of once to measure: the current sources, or a pre-change build given with --baseline. */
export interface OnceBuild {
  /** `once`, or `once (before)` for the baseline. */
  label: string;
  RedisStore: typeof RedisStore;
  createCallProcessor: typeof createCallProcessor;
}

/** What every section shares. */
export interface BenchContext {
  options: BenchOptions;
  target: RedisTarget;
  /** Prefix of every key and queue this run makes (cleaned up at the end). */
  prefix: string;
  /** A client for INFO, MEMORY and clean-up only. */
  probe: Redis;
  /** The build(s) of once to measure; the first is the current one. */
  builds: readonly OnceBuild[];
  log(message: string): void;
}
