import {
  type ClaimOutcome,
  type ClaimRequest,
  DEFAULT_RETENTION_MS,
  type OnceRecord,
  type OnceStore,
  type ResolveRequest,
  type StoredError,
  type StoreOptions,
  StoreUnavailableError,
  type WriteOutcome,
} from "@once/core";
import type { Cluster, Redis } from "ioredis";
import { checkDurability } from "./check-durability.js";
import { checkRedis } from "./check-redis.js";
import type { RedisReport } from "./diagnose-redis.js";
import {
  type Confirmation,
  loadScripts,
  type RunConfirmed,
  type RunScript,
  type Scripts,
} from "./load-scripts.js";
import { ownerNonce } from "./owner-nonce.js";
import type { ScriptName } from "./script-names.js";
import { toOutcome } from "./to-outcome.js";
import { toRecord } from "./to-record.js";
import { toStoreError } from "./to-store-error.js";
import { withTimeout } from "./with-timeout.js";

export interface RedisStoreOptions extends StoreOptions {
  /**
   * The client; the store never closes it. A `Cluster` works unchanged: every script touches one key. Any
   * retry settings work, since the store fails closed after `timeoutMs`; `enableOfflineQueue: false` fails
   * faster while Redis is down.
   */
  redis: Redis | Cluster;
  /** Prepended to every key. Default `"once:"`. */
  prefix?: string;
  /** Accept a `maxmemory-policy` other than `noeviction`. Default false: an evicted record can repeat an effect. */
  allowEviction?: boolean;
  /** Run the start-up checks (see {@link checkRedis}). Default true. */
  checks?: boolean;
  /**
   * How long one store call waits for Redis before failing closed with StoreUnavailableError. Default
   * 5000 ms. The command may still reach Redis later; leases make that safe (a claim nobody holds runs out).
   */
  timeoutMs?: number;
  /**
   * Past one Redis: every transition that precedes an effect (claim, beginEffect, resolveNotApplied) is
   * acknowledged by `replicas` replicas (`WAIT`, pipelined with the script: still one round trip) before the
   * effect may run, and every transition that settles one before the call returns. Unconfirmed within
   * `timeoutMs`, a transition before an effect runs no effect (StoreUnavailableError; a claim it made is handed
   * back); a settle waits again until the store's `timeoutMs`, then fails, and the job is not acknowledged.
   * `fsync: true` waits for the AOF fsync locally and on the replicas (`WAITAOF`, Redis 7.2+ or Valkey).
   * Refused at start when fewer replicas are connected, or the server refuses the command.
   */
  durability?: { replicas: number; timeoutMs: number; fsync?: boolean };
}

/** The transitions whose record must survive a failover before the effect starts. */
const BEFORE_EFFECT: ReadonlySet<ScriptName> = new Set(["claim", "begin-effect", "resolve-not-applied"]);
/** The transitions that settle a call: confirmed before the call's answer is given. */
const SETTLES: ReadonlySet<ScriptName> = new Set([
  "complete",
  "fail-terminal",
  "mark-unknown",
  "release",
  "resolve-applied",
  "resolve",
  "give-up",
]);

/**
 * The dedup store on Redis: one hash per key, one Lua script (one round trip) per transition, time from
 * the server's clock, every owner write fenced by the full owner token. Build it with {@link RedisStore.create}.
 */
export class RedisStore implements OnceStore {
  readonly #run: RunScript;
  readonly #runConfirmed: RunConfirmed;
  readonly #confirmation: Confirmation | undefined;
  readonly #timeoutMs: number;
  /** Prepended to every key. */
  readonly prefix: string;
  /** How long a record outlives its last transition, in ms. */
  readonly retentionMs: number;
  /** What the start-up checks found; undefined when they were skipped. */
  readonly report: RedisReport | undefined;

  private constructor(scripts: Scripts, options: RedisStoreOptions, report: RedisReport | undefined) {
    this.#run = scripts.run;
    this.#runConfirmed = scripts.runConfirmed;
    const { durability } = options;
    this.#confirmation = durability && { ...durability, fsync: durability.fsync === true };
    this.#timeoutMs = options.timeoutMs ?? 5_000;
    this.prefix = options.prefix ?? "once:";
    this.retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    this.report = report;
  }

  /** Loads the scripts and, unless `checks: false`, refuses a Redis that could lose records (RedisConfigError). */
  static async create(options: RedisStoreOptions): Promise<RedisStore> {
    const retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    positiveInteger("retentionMs", retentionMs);
    if (options.timeoutMs !== undefined) positiveInteger("timeoutMs", options.timeoutMs);
    if (options.durability !== undefined) {
      positiveInteger("durability.replicas", options.durability.replicas);
      positiveInteger("durability.timeoutMs", options.durability.timeoutMs);
    }
    const report =
      options.checks === false
        ? undefined
        : await checkRedis(options.redis, {
            ...(options.allowEviction === undefined ? {} : { allowEviction: options.allowEviction }),
            ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
          });
    const scripts = await loadScripts(options.redis);
    if (options.durability !== undefined)
      await checkDurability(options.redis, options.durability, options.timeoutMs ?? 5_000);
    return new RedisStore(scripts, options, report);
  }

  async claim(request: ClaimRequest): Promise<ClaimOutcome> {
    positiveInteger("leaseMs", request.leaseMs);
    const nonce = ownerNonce();
    const reply = await this.#call("claim", request.key, [
      request.fingerprint,
      request.tool,
      request.phase,
      request.leaseMs,
      this.retentionMs,
      nonce,
      request.trace ?? "",
    ]);
    return toOutcome("claim", reply);
  }

  async beginEffect(key: string, token: string): Promise<WriteOutcome> {
    return toOutcome("begin-effect", await this.#call("begin-effect", key, [token, this.retentionMs]));
  }

  async complete(key: string, token: string, result: string): Promise<WriteOutcome> {
    return toOutcome("complete", await this.#call("complete", key, [token, result, this.retentionMs]));
  }

  async failTerminal(key: string, token: string, error: StoredError): Promise<WriteOutcome> {
    const reply = await this.#call("fail-terminal", key, [token, JSON.stringify(error), this.retentionMs]);
    return toOutcome("fail-terminal", reply);
  }

  async release(key: string, token: string, options: { notApplied?: boolean } = {}): Promise<WriteOutcome> {
    const reply = await this.#call("release", key, [token, options.notApplied ? "1" : "", this.retentionMs]);
    return toOutcome("release", reply);
  }

  async markUnknown(key: string, token: string, error?: StoredError): Promise<WriteOutcome> {
    const reply = await this.#call("mark-unknown", key, [token, errorArg(error), this.retentionMs]);
    return toOutcome("mark-unknown", reply);
  }

  async heartbeat(key: string, token: string, leaseMs: number): Promise<WriteOutcome> {
    positiveInteger("leaseMs", leaseMs);
    return toOutcome("heartbeat", await this.#call("heartbeat", key, [token, leaseMs, this.retentionMs]));
  }

  async resolveApplied(key: string, token: string, result: string): Promise<WriteOutcome> {
    return toOutcome(
      "resolve-applied",
      await this.#call("resolve-applied", key, [token, result, this.retentionMs]),
    );
  }

  async resolveNotApplied(key: string, token: string): Promise<WriteOutcome> {
    return toOutcome(
      "resolve-not-applied",
      await this.#call("resolve-not-applied", key, [token, this.retentionMs]),
    );
  }

  async giveUp(key: string, token: string, error?: StoredError): Promise<WriteOutcome> {
    return toOutcome("give-up", await this.#call("give-up", key, [token, errorArg(error), this.retentionMs]));
  }

  async resolve(key: string, request: ResolveRequest): Promise<WriteOutcome> {
    const { decision } = request;
    const payload =
      decision.as === "applied"
        ? decision.result
        : decision.as === "failed"
          ? JSON.stringify(decision.error)
          : "";
    const reply = await this.#call("resolve", key, [
      decision.as,
      payload,
      request.by,
      request.why,
      request.expectFence ?? "",
      this.retentionMs,
    ]);
    return toOutcome("resolve", reply);
  }

  async get(key: string): Promise<OnceRecord | undefined> {
    return toRecord(key, await this.#call("get", key, []));
  }

  /** One script, one round trip; whatever stands between us and Redis becomes StoreUnavailableError. */
  #call(script: ScriptName, key: string, args: readonly (string | number)[]): Promise<unknown> {
    const confirmation = this.#confirmation;
    if (confirmation && (BEFORE_EFFECT.has(script) || SETTLES.has(script)))
      return this.#confirmedCall(script, key, args, confirmation);
    return this.#unconfirmedCall(script, key, args);
  }

  async #unconfirmedCall(
    script: ScriptName,
    key: string,
    args: readonly (string | number)[],
  ): Promise<unknown> {
    try {
      return await withTimeout(this.#run(script, this.prefix + key, args), this.#timeoutMs);
    } catch (error) {
      throw toStoreError(script, error);
    }
  }

  /** The script and its `WAIT` in one round trip; a settle waits again while the store's `timeoutMs` allows. */
  async #confirmedCall(
    script: ScriptName,
    key: string,
    args: readonly (string | number)[],
    confirmation: Confirmation,
  ): Promise<unknown> {
    const fullKey = this.prefix + key;
    const settles = SETTLES.has(script);
    const deadline = performance.now() + this.#timeoutMs;
    let reply: unknown;
    let acknowledged: number;
    try {
      ({ reply, acknowledged } = await withTimeout(
        this.#runConfirmed(script, fullKey, args, confirmation),
        this.#timeoutMs,
      ));
      // A settle is the call's answer: wait again for a replica catching up, while the store's time allows.
      while (
        settles &&
        acknowledged < confirmation.replicas &&
        performance.now() + confirmation.timeoutMs < deadline
      )
        ({ acknowledged } = await this.#runConfirmed(undefined, fullKey, [], confirmation));
    } catch (error) {
      throw toStoreError(script, error);
    }
    if (acknowledged >= confirmation.replicas) return reply;
    if (!settles) await this.#handBack(script, key, args, reply);
    throw new StoreUnavailableError(
      `${script} (acknowledged by ${acknowledged} of the ${confirmation.replicas} replicas required within ` +
        `${settles ? this.#timeoutMs : confirmation.timeoutMs} ms)`,
    );
  }

  /**
   * A transition before an effect that was not confirmed runs no effect, and what it took is handed back so
   * the next attempt need not wait out the lease: a fresh claim, a begun effect or a "not applied" resolution
   * is released as not applied (true: nothing ran); a claim of an `unknown` record is marked `unknown` again
   * (the earlier owner's effect may have happened). Unconfirmed, best effort: if the hand-back is lost as
   * well, the lease runs out and the next claim takes over or reconciles.
   */
  async #handBack(script: ScriptName, key: string, args: readonly (string | number)[], reply: unknown) {
    let release: string | undefined = String(args[0]); // the owner token of begin-effect, resolve-not-applied
    if (script === "claim") {
      const claim = toOutcome("claim", reply);
      release = claim.outcome === "acquired" || claim.outcome === "takeover" ? claim.token : undefined;
      if (claim.outcome === "reconcile")
        await this.#unconfirmedCall("mark-unknown", key, [claim.token, "", this.retentionMs]).catch(() => {});
    }
    if (release !== undefined)
      await this.#unconfirmedCall("release", key, [release, "1", this.retentionMs]).catch(() => {});
  }
}

function errorArg(error: StoredError | undefined): string {
  return error === undefined ? "" : JSON.stringify(error);
}

function positiveInteger(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value <= 0)
    throw new RangeError(`${name} must be a positive integer, got ${value}`);
}
