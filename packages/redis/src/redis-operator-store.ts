import {
  type CancelOutcome,
  type CancelRequest,
  DEFAULT_RETENTION_MS,
  type DecisionResult,
  type ListRequest,
  type OnceRecord,
  type OperatorDecisionRequest,
  type OperatorResolveRequest,
  type OperatorStore,
  type RecordCounts,
  type RecordPage,
  type ResolveResult,
  StoreUnavailableError,
  type TaskRecords,
  type TaskRef,
} from "@once/core";
import { retentionOf } from "@once/core/internal";
import {
  cancellableTaskKey,
  decideFenced,
  matchesFilter,
  RecordTally,
  resolveFenced,
} from "@once/core/store-kit";
import type { Cluster, Redis } from "ioredis";
import { RedisStore } from "./redis-store.js";
import { type RecordBatch, scanRecordBatches } from "./scan-records.js";
import { toStoreError } from "./to-store-error.js";

export interface RedisOperatorStoreOptions {
  /** The client; never closed by the store. Records are read with SCAN on every master of a Cluster. */
  redis: Redis | Cluster;
  /** The store's key prefix. Default `"once:"`. */
  prefix?: string;
  /** Where the records are, for people (`label`); default the client's address. Never put a password here. */
  label?: string;
  /** How long one call waits for Redis before StoreUnavailableError. Default 5000 ms. */
  timeoutMs?: number;
}

const DEFAULT_SAMPLE = 10_000;

/**
 * The records of a RedisStore as an operator sees them: listed and counted with SCAN (never KEYS), read and
 * resolved through the store's own scripts. Creating it talks to no server, so a console can start while
 * Redis is down and say so.
 */
export class RedisOperatorStore implements OperatorStore {
  readonly label: string;
  readonly prefix: string;
  readonly #redis: Redis | Cluster;
  readonly #timeoutMs: number;
  #reader: Promise<RedisStore> | undefined;

  constructor(options: RedisOperatorStoreOptions) {
    this.#redis = options.redis;
    this.prefix = options.prefix ?? "once:";
    if (this.prefix === "") throw new RangeError("RedisOperatorStore needs a non-empty prefix");
    this.#timeoutMs = options.timeoutMs ?? 5_000;
    this.label = options.label ?? describeClient(options.redis);
  }

  async now(): Promise<number> {
    const [seconds, micros] = (await this.#op("time", () => this.#redis.time())) as [
      string | number,
      string | number,
    ];
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  async get(key: string): Promise<OnceRecord | undefined> {
    const store = await this.#store();
    return this.#op("get", () => store.get(key));
  }

  async list(request: ListRequest): Promise<RecordPage> {
    const now = await this.now();
    const records: OnceRecord[] = [];
    const seen = new Set<string>();
    let skipped = 0;
    let examined = 0;
    let cursor: string | undefined = request.cursor;
    const batches = this.#batches({
      // Whole batches make a page, so a batch no larger than the page keeps the page near its limit.
      batchSize: Math.min(250, Math.max(1, request.limit)),
      onSkipped: () => skipped++,
      ...(request.cursor === undefined ? {} : { cursor: request.cursor }),
    });
    for await (const batch of batches) {
      cursor = batch.cursor;
      examined += batch.keys;
      for (const record of batch.records) {
        if (seen.has(record.key) || !matchesFilter(record, request, now)) continue;
        seen.add(record.key);
        records.push(record);
      }
      if (records.length >= request.limit) break;
      if (request.maxExamined !== undefined && examined >= request.maxExamined) break;
    }
    return { records, examined, skipped, now, ...(cursor === undefined ? {} : { cursor }) };
  }

  async count(options: { sample?: number } = {}): Promise<RecordCounts> {
    const sample = options.sample ?? DEFAULT_SAMPLE;
    const now = await this.now();
    const tally = new RecordTally(now);
    const seen = new Set<string>();
    let skipped = 0;
    let sampled = false;
    for await (const batch of this.#batches({ onSkipped: () => skipped++ })) {
      for (const record of batch.records) {
        if (seen.has(record.key)) continue;
        if (seen.size + skipped >= sample) {
          sampled = true;
          break;
        }
        seen.add(record.key);
        tally.add(record);
      }
      if (sampled) break;
    }
    const totalKeys = await this.#op("dbsize", () => databaseSize(this.#redis));
    return tally.counts({ sampled, skipped, totalKeys });
  }

  resolve(key: string, request: OperatorResolveRequest): Promise<ResolveResult> {
    return resolveFenced(this, (retentionMs) => this.#storeWith(retentionMs), key, request);
  }

  approve(key: string, request: OperatorDecisionRequest): Promise<DecisionResult> {
    return decideFenced(this, (retentionMs) => this.#storeWith(retentionMs), key, "approved", request);
  }

  deny(key: string, request: OperatorDecisionRequest): Promise<DecisionResult> {
    return decideFenced(this, (retentionMs) => this.#storeWith(retentionMs), key, "denied", request);
  }

  async cancel(task: TaskRef, request: CancelRequest): Promise<CancelOutcome> {
    // Refused before anything is read, as the store refuses it.
    cancellableTaskKey(task, request);
    // The retention the task's records were written with, so a cancel never shortens their lives (nor the
    // entry's, which must outlive every retry of them).
    const { records } = await this.task(task);
    const now = await this.now();
    const retentionMs =
      records.length === 0
        ? DEFAULT_RETENTION_MS
        : Math.max(...records.map((record) => retentionOf(record, now)));
    const store = await this.#storeWith(retentionMs);
    return this.#op("cancel", () => store.cancelTask(task, request));
  }

  async task(task: TaskRef): Promise<TaskRecords> {
    const store = await this.#store();
    return this.#op("task", () => store.readTask(task));
  }

  /** The store's own scripts, with the retention a written record gets. */
  #storeWith(retentionMs: number): Promise<RedisStore> {
    return RedisStore.create({
      redis: this.#redis,
      prefix: this.prefix,
      checks: false,
      timeoutMs: this.#timeoutMs,
      retentionMs,
    });
  }

  /** The scan's batches, each round trip bounded by the store's timeout. */
  async *#batches(options: {
    cursor?: string;
    batchSize?: number;
    onSkipped: () => void;
  }): AsyncGenerator<RecordBatch> {
    const batches = scanRecordBatches(this.#redis, { prefix: this.prefix, ...options });
    try {
      for (;;) {
        const next = await this.#op("scan", () => batches.next());
        if (next.done) return;
        yield next.value;
      }
    } finally {
      await batches.return(undefined).catch(() => {});
    }
  }

  #store(): Promise<RedisStore> {
    this.#reader ??= RedisStore.create({
      redis: this.#redis,
      prefix: this.prefix,
      checks: false,
      timeoutMs: this.#timeoutMs,
    }).catch((error: unknown) => {
      this.#reader = undefined;
      throw error;
    });
    return this.#reader;
  }

  /** A read of our own, bounded by the store's timeout; trouble reaching Redis is StoreUnavailableError. */
  async #op<T>(operation: string, run: () => Promise<T>): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      return await Promise.race([
        run(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no answer within ${this.#timeoutMs} ms`)),
            this.#timeoutMs,
          );
        }),
      ]);
    } catch (error) {
      const cause = error instanceof StoreUnavailableError ? error.cause : error;
      // ioredis' words for a client that is reconnecting and queues nothing (enableOfflineQueue: false).
      if (cause instanceof Error && cause.message.includes("enableOfflineQueue"))
        throw new StoreUnavailableError(operation, {
          cause: new Error("no connection to Redis (reconnecting)"),
        });
      throw toStoreError(operation, error);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** DBSIZE of the server, or summed over a Cluster's masters (each holds its own slots). */
export async function databaseSize(redis: Redis | Cluster): Promise<number> {
  const nodes = redis.isCluster ? (redis as Cluster).nodes("master") : [redis as Redis];
  const sizes = await Promise.all(nodes.map((node) => node.dbsize()));
  return sizes.reduce((sum, n) => sum + n, 0);
}

/** `redis://host:port/db`: the client's address, with no credentials. */
function describeClient(redis: Redis | Cluster): string {
  if (redis.isCluster) return "a Redis Cluster";
  const { host, port, db, tls } = (redis as Redis).options;
  return `${tls ? "rediss" : "redis"}://${host ?? "127.0.0.1"}:${port ?? 6379}${db ? `/${db}` : ""}`;
}
