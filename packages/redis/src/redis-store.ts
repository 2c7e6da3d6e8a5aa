import {
  type ApprovalAsk,
  type ApprovalRequestOutcome,
  type ApprovalStore,
  type Cancellation,
  type CancelOutcome,
  type CancelRequest,
  type ClaimOutcome,
  type ClaimRequest,
  DEFAULT_NAMESPACE,
  DEFAULT_RETENTION_MS,
  type DecisionRequest,
  deniedError,
  deriveTaskKey,
  type LivenessStore,
  type OnceRecord,
  type ResolveRequest,
  type StoredError,
  type StoreOptions,
  StoreUnavailableError,
  type TaskRecords,
  type TaskRef,
  type TaskStore,
  type WriteOutcome,
} from "@once/core";
import { OUTCOME_CODES } from "@once/core/internal";
import {
  cancellableTaskKey,
  livenessTtl,
  ownerNonce,
  positiveInteger,
  retryAfterFor,
  withTimeout,
} from "@once/core/store-kit";
import type { Cluster, Redis } from "ioredis";
import { checkDurability } from "./check-durability.js";
import { checkRedis } from "./check-redis.js";
import type { RedisReport } from "./diagnose-redis.js";
import { RedisScriptError } from "./errors.js";
import { livenessKey } from "./liveness-entry.js";
import {
  type Confirmation,
  loadScripts,
  type RunConfirmed,
  type RunScript,
  type ScriptArg,
  type Scripts,
} from "./load-scripts.js";
import { unpackRecord } from "./packed-record.js";
import { fingerprintBytes, traceBytes } from "./record-bytes.js";
import { refuseNewerLayout } from "./record-layout.js";
import type { ScriptName } from "./script-names.js";
import { readTaskEntry, taskEntryKey } from "./task-entry.js";
import { toApprovalRequest, toFiling, toOutcome } from "./to-outcome.js";
import { toRecord } from "./to-record.js";
import { toStoreError } from "./to-store-error.js";

export interface RedisStoreOptions extends StoreOptions {
  /**
   * The client; the store never closes it. A `Cluster` works unchanged: every script touches one key, but for
   * a claim that names its task on one server, which files it in the same script (on a Cluster that is two
   * scripts, one on the task's entry and then the claim: see docs/cancellation.md). Any
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
const BEFORE_EFFECT: ReadonlySet<ScriptName> = new Set([
  "claim",
  "claim-filed",
  // A filing a failover lost would let a cancel miss the call it files.
  "file",
  "begin-effect",
  "resolve-not-applied",
]);
/** The transitions that settle a call: confirmed before the call's answer is given. */
const SETTLES: ReadonlySet<ScriptName> = new Set([
  "complete",
  "fail-terminal",
  "mark-unknown",
  "release",
  "resolve-applied",
  "resolve",
  "give-up",
  // Not settles of an effect, but the call's answer all the same: a request or a decision a failover lost
  // would be asked, or decided, a second time.
  "request-approval",
  "decide",
  // A cancel's answer says no effect of the task starts: its mark and its visits must survive a failover.
  "cancel-task",
  "cancel-record",
]);

/**
 * The dedup store on Redis: one hash per key, one Lua script (one round trip) per transition, time from
 * the server's clock, every owner write fenced by the full owner token. Build it with {@link RedisStore.create}.
 */
export class RedisStore implements ApprovalStore, TaskStore, LivenessStore {
  readonly #redis: Redis | Cluster;
  readonly #run: RunScript;
  readonly #runConfirmed: RunConfirmed;
  readonly #confirmation: Confirmation | undefined;
  readonly #timeoutMs: number;
  readonly #keepTaskIdentity: boolean;
  /** Prepended to every key. */
  readonly prefix: string;
  /** How long a record outlives its last transition, in ms. */
  readonly retentionMs: number;
  /** What the start-up checks found; undefined when they were skipped. */
  readonly report: RedisReport | undefined;

  private constructor(scripts: Scripts, options: RedisStoreOptions, report: RedisReport | undefined) {
    this.#redis = options.redis;
    this.#run = scripts.run;
    this.#runConfirmed = scripts.runConfirmed;
    const { durability } = options;
    this.#confirmation = durability && { ...durability, fsync: durability.fsync === true };
    this.#timeoutMs = options.timeoutMs ?? 5_000;
    this.prefix = options.prefix ?? "once:";
    this.retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    this.#keepTaskIdentity = options.keepTaskIdentity ?? true;
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

  /**
   * Claims the key. When another owner's lease is alive and its record names a liveness entry, the entry is
   * read (on a Cluster it is in another slot, so the claim script cannot read it): gone, the claim is sent
   * again saying so, and the script takes over or reconciles if the record still names that entry at the
   * fence read (docs/protocol.md, "Liveness").
   */
  async claim(request: ClaimRequest): Promise<ClaimOutcome> {
    const first = await this.#claimOnce(request, NOTHING_GONE);
    if (!Array.isArray(first) || first[0] !== IN_FLIGHT || typeof first[4] !== "string")
      return toOutcome("claim", first);
    const live = first[4];
    const left = await this.#livenessLeft(live);
    if (left > 0) {
      const busy = toOutcome("claim", first);
      // Come back when the entry would run out, if that is before the lease.
      return busy.outcome === "in_flight"
        ? { ...busy, retryAfterMs: Math.min(busy.retryAfterMs, retryAfterFor(left)) }
        : busy;
    }
    // Naming its task again (filing is idempotent): a cancel that came between the two is seen, and refuses it.
    return toOutcome("claim", await this.#claimOnce(request, [live, Number(first[1])]));
  }

  /** One claim script; its raw reply (an in-flight reply carries the owner's liveness entry, if any). */
  async #claimOnce(request: ClaimRequest, gone: readonly [string, number | ""]): Promise<unknown> {
    positiveInteger("leaseMs", request.leaseMs);
    const { task } = request;
    const taskKey = task === undefined ? undefined : deriveTaskKey(task);
    const kept = task !== undefined && this.#keepTaskIdentity;
    const identity = kept ? [task.namespace, task.taskId, task.stepId] : ["", "", ""];
    const args = [
      fingerprintBytes(request.fingerprint),
      request.tool,
      request.phase,
      request.leaseMs,
      this.retentionMs,
      ownerNonce(),
      traceBytes(request.trace),
      ...identity,
    ];
    const liveness = [request.liveness ?? "", ...gone];
    if (taskKey === undefined) return this.#call("claim", request.key, [...args, ...liveness]);
    const entry = taskEntryKey(taskKey);
    if (!this.#redis.isCluster) {
      // One script over the record and the task's entry: the claim is wholly before a cancel or after it.
      return this.#call("claim-filed", [request.key, entry], [...args, request.key, ...liveness]);
    }
    // On a Cluster the two keys are in different slots: filed first, then claimed (docs/cancellation.md).
    const filed = await this.#call("file", entry, [
      request.key,
      identity[1] ?? "",
      identity[0] ?? "",
      this.retentionMs,
    ]);
    const refusal = toFiling(filed);
    if (refusal !== undefined)
      return [CANCELLED, await this.#fenceOf(request.key), ...cancelledFields(refusal.cancellation)];
    return this.#call("claim", request.key, [...args, ...liveness]);
  }

  async openLiveness(id: string, ttlMs: number): Promise<boolean> {
    return (await this.#liveness("open", id, ttlMs)) === 1;
  }

  async renewLiveness(id: string, ttlMs: number): Promise<boolean> {
    return (await this.#liveness("renew", id, ttlMs)) === 1;
  }

  async endLiveness(id: string): Promise<void> {
    await this.#liveness("end", id, 0);
  }

  /** The entry's time left, ms; 0 or less when it is gone. Read on the entry's own node, its primary. */
  async #livenessLeft(id: string): Promise<number> {
    const left = await this.#liveness("read", id, 0);
    return typeof left === "number" ? left : -2;
  }

  /**
   * The liveness script. `open` and `renew` are confirmed by the replicas like a claim (an entry a failover
   * lost would make its claims look dead: safe, the fence holds, but needless reconciles); unconfirmed, they
   * fail closed, and the engine does not claim on, or trust, that entry.
   */
  async #liveness(op: "open" | "renew" | "end" | "read", id: string, ttlMs: number): Promise<unknown> {
    if (op === "open" || op === "renew") livenessTtl(ttlMs);
    const key = livenessKey(id);
    const args = [op, ttlMs];
    const confirmation = this.#confirmation;
    if (confirmation && (op === "open" || op === "renew"))
      return this.#confirmedCall("liveness", key, args, confirmation);
    return this.#unconfirmedCall("liveness", key, args);
  }

  /**
   * Cancels a task (docs/cancellation.md): marks its entry, then visits every call filed before the mark — one
   * script per record, all sent at once. A claim filed after the mark is refused; one filed before it is
   * stopped by its visit unless its effect had begun, and then it began before this returns.
   */
  async cancelTask(task: TaskRef, request: CancelRequest): Promise<CancelOutcome> {
    const entry = taskEntryKey(cancellableTaskKey(task, request));
    const identity = this.#keepTaskIdentity ? [task.taskId, task.namespace ?? DEFAULT_NAMESPACE] : ["", ""];
    const reply = await this.#call("cancel-task", entry, [
      request.by,
      request.why,
      this.retentionMs,
      ...identity,
    ]);
    if (!Array.isArray(reply) || (reply[0] !== 0 && reply[0] !== 1))
      throw new RedisScriptError("cancel-task", `unexpected reply ${JSON.stringify(reply)}`);
    const [code, by, why, at, ...filed] = reply as [number, string, string, number, ...string[]];
    const cancellation: Cancellation = { by: String(by), why: String(why), at: Number(at) };
    // A repeated cancel visits the filed calls again, which changes nothing after a cancel that finished, and
    // finishes one that failed half way (its caller saw an error, and cancels again).
    const visits = await Promise.all(
      filed.map(async (key) => {
        const visit = await this.#call("cancel-record", key, [by, why, at, this.retentionMs]);
        if (!Array.isArray(visit) || ![0, 1, 2].includes(visit[0] as number))
          throw new RedisScriptError("cancel-record", `unexpected reply ${JSON.stringify(visit)}`);
        return [key, visit[0] as number] as const;
      }),
    );
    if (code === 0) return { outcome: "already_cancelled", cancellation, stopped: [], running: [] };
    return {
      outcome: "cancelled",
      cancellation,
      stopped: visits.filter(([, visit]) => visit === 1).map(([key]) => key),
      running: visits.filter(([, visit]) => visit === 2).map(([key]) => key),
    };
  }

  /**
   * The task's cancellation and every live call filed under it, in the order of their first claim. On one
   * server (or a Sentinel's master) one script reads the entry and every record: one round trip, however many
   * calls the task has. On a Cluster the records are in other slots: the entry first, then every record at
   * once, each on its own node (two round trips of latency, one command per record).
   */
  async readTask(task: TaskRef): Promise<TaskRecords> {
    const entry = taskEntryKey(deriveTaskKey(task));
    const { fields, records } = this.#redis.isCluster
      ? await this.#readTaskSpread(entry)
      : await this.#readTaskAtOnce(entry);
    const { cancellation, filed } = readTaskEntry(fields);
    return {
      namespace: task.namespace ?? DEFAULT_NAMESPACE,
      taskId: task.taskId,
      ...(cancellation === undefined ? {} : { cancellation }),
      records: filed
        .map((key) => records.get(key))
        .filter((record): record is OnceRecord => record !== undefined),
    };
  }

  async #readTaskAtOnce(
    entry: string,
  ): Promise<{ fields: Record<string, string>; records: Map<string, OnceRecord> }> {
    const reply = await this.#call("read-task", entry, [this.prefix]);
    if (!Array.isArray(reply) || reply.length % 3 !== 1 || !reply.slice(0, 4).every(Array.isArray))
      throw new RedisScriptError("read-task", `unexpected reply ${JSON.stringify(reply)}`);
    const [flat, fieldNames, states, phases, ...filed] = reply as [
      string[],
      string[],
      string[],
      string[],
      ...unknown[],
    ];
    const names = { fields: fieldNames, states, phases };
    const fields: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) fields[String(flat[i])] = String(flat[i + 1]);
    const records = new Map<string, OnceRecord>();
    for (let i = 0; i + 2 < filed.length; i += 3) {
      const key = String(filed[i]);
      const kept = filed[i + 2];
      const recordFields = Buffer.isBuffer(kept) ? unpackRecord(key, kept, names) : kept;
      const record = toRecord(key, [filed[i + 1], recordFields]);
      if (record !== undefined) records.set(key, record);
    }
    return { fields, records };
  }

  async #readTaskSpread(
    entry: string,
  ): Promise<{ fields: Record<string, string>; records: Map<string, OnceRecord> }> {
    let fields: Record<string, string>;
    try {
      fields = await withTimeout(this.#redis.hgetall(this.prefix + entry), this.#timeoutMs, "Redis");
    } catch (error) {
      throw toStoreError("read-task", error);
    }
    const { filed } = readTaskEntry(fields);
    const records = new Map<string, OnceRecord>();
    // Sent together: the client writes each to its node's connection without waiting for the one before.
    for (const [key, record] of await Promise.all(
      filed.map(async (key) => [key, await this.get(key)] as const),
    ))
      if (record !== undefined) records.set(key, record);
    return { fields, records };
  }

  /** The record's fence, 0 without a record: what a claim refused by its task's cancel answers with. */
  async #fenceOf(key: string): Promise<number> {
    return (await this.get(key))?.fence ?? 0;
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

  async requestApproval(key: string, token: string, ask: ApprovalAsk): Promise<ApprovalRequestOutcome> {
    positiveInteger("ttlMs", ask.ttlMs);
    const reply = await this.#call("request-approval", key, [token, ask.reason, ask.ttlMs, this.retentionMs]);
    return toApprovalRequest(reply);
  }

  async decide(key: string, request: DecisionRequest): Promise<WriteOutcome> {
    const denial = request.decision === "denied" ? JSON.stringify(deniedError(request.by, request.why)) : "";
    const reply = await this.#call("decide", key, [
      request.decision,
      denial,
      request.by,
      request.why,
      request.expectFence,
      fingerprintBytes(request.fingerprint),
      this.retentionMs,
    ]);
    return toOutcome("decide", reply);
  }

  async get(key: string): Promise<OnceRecord | undefined> {
    return toRecord(key, await this.#call("get", key, []));
  }

  /**
   * One script, one round trip; whatever stands between us and Redis becomes StoreUnavailableError. `keys`
   * are without the prefix, the record's first (the one a refused layout names).
   */
  #call(script: ScriptName, keys: string | readonly string[], args: readonly ScriptArg[]): Promise<unknown> {
    const confirmation = this.#confirmation;
    if (confirmation && (BEFORE_EFFECT.has(script) || SETTLES.has(script)))
      return this.#confirmedCall(script, keys, args, confirmation);
    return this.#unconfirmedCall(script, keys, args);
  }

  async #unconfirmedCall(
    script: ScriptName,
    keys: string | readonly string[],
    args: readonly ScriptArg[],
  ): Promise<unknown> {
    const named = typeof keys === "string" ? [keys] : keys;
    let reply: unknown;
    try {
      reply = await withTimeout(this.#run(script, this.#prefixed(named), args), this.#timeoutMs, "Redis");
    } catch (error) {
      throw toStoreError(script, error);
    }
    refuseNewerLayout(named[0] ?? "", reply);
    return reply;
  }

  #prefixed(keys: readonly string[]): string[] {
    return keys.map((key) => this.prefix + key);
  }

  /** The script and its `WAIT` in one round trip; a settle waits again while the store's `timeoutMs` allows. */
  async #confirmedCall(
    script: ScriptName,
    keys: string | readonly string[],
    args: readonly ScriptArg[],
    confirmation: Confirmation,
  ): Promise<unknown> {
    const named = typeof keys === "string" ? [keys] : keys;
    const key = named[0] ?? "";
    const fullKeys = this.#prefixed(named);
    const settles = SETTLES.has(script);
    const deadline = performance.now() + this.#timeoutMs;
    let reply: unknown;
    let acknowledged: number;
    try {
      ({ reply, acknowledged } = await withTimeout(
        this.#runConfirmed(script, fullKeys, args, confirmation),
        this.#timeoutMs,
        "Redis",
      ));
      // A record refused for its layout was not touched: nothing to confirm, nothing to hand back.
      refuseNewerLayout(key, reply);
      // A settle is the call's answer: wait again for a replica catching up, while the store's time allows.
      while (
        settles &&
        acknowledged < confirmation.replicas &&
        performance.now() + confirmation.timeoutMs < deadline
      )
        ({ acknowledged } = await this.#runConfirmed(undefined, fullKeys, [], confirmation));
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
  async #handBack(script: ScriptName, key: string, args: readonly ScriptArg[], reply: unknown) {
    // An unconfirmed filing took nothing: the claim it precedes is not run. An unconfirmed liveness entry
    // names no claim yet (its process claims only on a confirmed one), and it runs out by itself.
    if (script === "file" || script === "liveness") return;
    let release: string | undefined = String(args[0]); // the owner token of begin-effect, resolve-not-applied
    if (script === "claim" || script === "claim-filed") {
      const claim = toOutcome(script, reply);
      release = claim.outcome === "acquired" || claim.outcome === "takeover" ? claim.token : undefined;
      if (claim.outcome === "reconcile")
        await this.#unconfirmedCall("mark-unknown", key, [claim.token, "", this.retentionMs]).catch(() => {});
    }
    if (release !== undefined)
      await this.#unconfirmedCall("release", key, [release, "1", this.retentionMs]).catch(() => {});
  }
}

/** A claim that saw no liveness entry gone. */
const NOTHING_GONE = ["", ""] as const;
const IN_FLIGHT = OUTCOME_CODES.in_flight;
const CANCELLED = OUTCOME_CODES.cancelled;

/** The claim script's reply fields of a cancellation (after the code and the fence). */
function cancelledFields(cancellation: Cancellation): [string, string, number] {
  return [cancellation.by, cancellation.why, cancellation.at];
}

function errorArg(error: StoredError | undefined): string {
  return error === undefined ? "" : JSON.stringify(error);
}
