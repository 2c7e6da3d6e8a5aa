import { createHash } from "node:crypto";
import { IdempotencyConfig, makeIdempotent } from "@aws-lambda-powertools/idempotency";
import { CachePersistenceLayer } from "@aws-lambda-powertools/idempotency/cache";
import { deriveKey, fingerprint, type OnceStore } from "@once/core";
import type { Redis } from "ioredis";
import { type INPUT, TOOL_NAME } from "./workload.js";

/** The payload every contender gets: the step's identity and the tool's input. */
export interface StepPayload {
  taskId: string;
  stepId: string;
  input: typeof INPUT;
}

/** One idempotency implementation as the store bench drives it. */
export interface StoreContender {
  readonly name: string;
  /** A first run: claim the step, run the no-op effect, store its result. */
  cycle(payload: StepPayload): Promise<void>;
  /** A repeat of a finished step: the stored result, parsed, and nothing run. */
  replay(payload: StepPayload): Promise<unknown>;
}

const RETENTION_SECONDS = 24 * 60 * 60;
const LEASE_MS = 30_000;

/** once's RedisStore: claim (one script), run, complete (one script). Keys and fingerprints made here. */
export function onceContender(
  name: string,
  store: Pick<OnceStore, "claim" | "complete">,
  result: unknown,
): StoreContender {
  const claim = async (payload: StepPayload) => {
    const key = deriveKey({ namespace: "bench", taskId: payload.taskId, stepId: payload.stepId });
    const claimed = await store.claim({
      key,
      // Hashed on every claim, as a worker does (Powertools hashes its payload on every call too).
      fingerprint: fingerprint(TOOL_NAME, payload.input),
      tool: TOOL_NAME,
      phase: "effect",
      leaseMs: LEASE_MS,
    });
    return { key, claimed };
  };
  return {
    name,
    async cycle(payload) {
      const { key, claimed } = await claim(payload);
      if (claimed.outcome !== "acquired")
        throw new Error(`${name}: expected acquired, got ${claimed.outcome}`);
      const written = await store.complete(key, claimed.token, JSON.stringify(result));
      if (written.outcome !== "ok") throw new Error(`${name}: complete answered ${written.outcome}`);
    },
    async replay(payload) {
      const { claimed } = await claim(payload);
      if (claimed.outcome !== "replay") throw new Error(`${name}: expected replay, got ${claimed.outcome}`);
      return JSON.parse(claimed.result);
    },
  };
}

/** What `@redis/client`'s connected client offers the Powertools cache layer. */
type CacheClient = ConstructorParameters<typeof CachePersistenceLayer>[0]["client"];

/**
 * `@aws-lambda-powertools/idempotency`: `makeIdempotent` over its Redis/Valkey persistence layer
 * (`CachePersistenceLayer`) on `@redis/client`. The in-process LRU (`useLocalCache`) is off unless asked for:
 * with it, a replay seen before by this process never reaches Redis.
 */
export function powertoolsContender(
  name: string,
  client: CacheClient,
  keyPrefix: string,
  result: unknown,
  useLocalCache = false,
): StoreContender {
  const persistenceStore = new CachePersistenceLayer({ client });
  const config = new IdempotencyConfig({
    expiresAfterSeconds: RETENTION_SECONDS,
    useLocalCache,
    maxLocalCacheSize: 100_000,
  });
  // Outside Lambda there is no context; this stands in for it so in-progress records get the same 30 s lease
  // as once's (and Powertools does not warn on every call).
  config.registerLambdaContext({ getRemainingTimeInMillis: () => LEASE_MS } as never);
  const charge = makeIdempotent(async (_payload: StepPayload) => result, {
    persistenceStore,
    config,
    keyPrefix,
  });
  return {
    name,
    async cycle(payload) {
      await charge(payload);
    },
    async replay(payload) {
      return charge(payload);
    },
  };
}

/**
 * The article's pseudocode, done plainly: GET; if absent SET in-flight; run; SET done with the result. A
 * replay is the one GET (the article's `else` branch GETs a second time; this reuses the first answer). Not
 * atomic (two workers can both see nothing between the GET and the SET): the floor, not a contender anyone
 * should ship.
 */
export function naiveContender(name: string, redis: Redis, prefix: string, result: unknown): StoreContender {
  // The article's key: sha256(f"{task_id}:{step_id}").
  const keyOf = (payload: StepPayload) =>
    prefix + createHash("sha256").update(`${payload.taskId}:${payload.stepId}`).digest("hex");
  return {
    name,
    async cycle(payload) {
      const key = keyOf(payload);
      const existing = await redis.get(key);
      if (existing !== null) throw new Error(`${name}: ${key} exists`);
      await redis.set(key, '{"state":"in_flight"}', "EX", RETENTION_SECONDS);
      await redis.set(key, JSON.stringify({ state: "done", result }), "EX", RETENTION_SECONDS);
    },
    async replay(payload) {
      const existing = await redis.get(keyOf(payload));
      const record =
        existing === null ? undefined : (JSON.parse(existing) as { state: string; result: unknown });
      if (record?.state !== "done") throw new Error(`${name}: expected a done record`);
      return record.result;
    },
  };
}
