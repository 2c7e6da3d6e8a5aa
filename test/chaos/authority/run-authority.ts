// The authority run: approvals and cancellation under faults. Two agent processes drive the same tasks (so
// every call is resumed twice at once) while they are SIGKILLed and restarted; two approvers decide the
// requests after a delay — approving, denying, sending an approve and a deny at the same moment, or leaving a
// request to expire; an operator cancels one task in five at a random moment. Judged at the provider's ledger
// and by what the approvers and the operator were told, never by once's own counters:
// 0 effects without an approval, ≤ 1 effect per approval, 0 after a deny, 0 started after a cancel returned,
// 0 duplicates, no task left without an answer, no request asked twice.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { deriveKey, OnceError, type OperatorStore } from "@once/core";
import { PaymentsClient } from "@once/payments";
import { type ChaosChild, type ChildEvent, startChaosChild } from "../chaos-child.js";
import { startPaymentsProcess } from "../payments-process.js";
import { Random } from "../random.js";
import type { TaskEnd } from "./authority-agent.js";
import { type AuthorityTask, authorityPlan } from "./authority-plan.js";
import {
  type AuthorityStoreLocation,
  type OpenedAuthorityStore,
  openAuthorityStore,
  storeName,
} from "./authority-store.js";

export interface AuthorityOptions {
  seed: number;
  location: AuthorityStoreLocation;
  tasks: number;
  /** How long the faults go on; the cancels fall in its first 60 %. */
  durationMs: number;
  /** SIGKILLs of agent processes, spread over the duration. */
  kills: number;
  /** How long a request waits for a decision: the ones nobody answers expire after it. */
  approvalTtlMs: number;
  log?: (line: string) => void;
}

export interface AuthorityReport {
  seed: number;
  store: string;
  tasks: number;
  agentKills: number;
  /** Approval requests created (the hook's reports, distinct keys). */
  approvalsRequested: number;
  /** Requests put to a person more than once: a second hook report, or a new request time seen by an approver. */
  approvalsAskedTwice: number;
  approved: number;
  denied: number;
  /** An approve and a deny sent at the same moment: how many, and how many saw both accepted (must be 0). */
  races: number;
  racesBothAccepted: number;
  /** Charges of an approval-needing call with no approval accepted by the store. */
  effectsWithoutApproval: number;
  /** The most charges one accepted approval led to. */
  effectsPerApprovalMax: number;
  effectsAfterDeny: number;
  cancels: number;
  /** Calls whose effect was running when their task's cancel reached them (told to stop, not stopped). */
  runningAtCancel: number;
  /** Effects of a cancelled task that began after its cancel returned and were not running at it. */
  effectsAfterCancel: number;
  /** Effects (charges and emails) beyond the first per call. */
  duplicateEffects: number;
  /** Tasks with no answer, or answered done by an agent while an effect is missing at the provider. */
  lost: number;
  ends: Record<TaskEnd, number>;
  details: string[];
  durationMs: number;
}

const CHARGE_STEP = "charge";
const RECEIPT_STEP = "receipt";
const LEASE_MS = 2_000;

/** Runs the authority workload once and judges it. */
export async function runAuthority(options: AuthorityOptions): Promise<AuthorityReport> {
  const started = Date.now();
  const log = options.log ?? (() => {});
  const random = new Random(options.seed).fork("authority-run");
  const plan = authorityPlan(options.seed, options.tasks, options.durationMs);
  const dir = mkdtempSync(path.join(os.tmpdir(), "once-authority-"));
  const tasksFile = path.join(dir, "tasks.json");
  writeFileSync(tasksFile, JSON.stringify(plan));
  const byChargeKey = new Map(
    plan.map((task) => [deriveKey({ taskId: task.taskId, stepId: CHARGE_STEP }), task]),
  );

  const payments = await startPaymentsProcess({ seed: options.seed, p50Ms: 20, p99Ms: 150 });
  // The operator's and the two approvers' own connections: an approve and a deny race through different ones.
  const opened: OpenedAuthorityStore[] = [];
  const agents = new Map<string, ChaosChild>();
  const events: ChildEvent[] = [];
  try {
    for (let i = 0; i < 3; i++) opened.push(await openAuthorityStore(options.location));
    const [operatorSide, approverA, approverB] = opened.map((o) => o.operator) as [
      OperatorStore,
      OperatorStore,
      OperatorStore,
    ];

    const startAgent = async (name: string) => {
      const child = await startChaosChild({
        name,
        script: "chaos/authority/authority-agent.ts",
        readyEvent: "ready",
        env: {
          AUTHORITY_STORE: JSON.stringify(options.location),
          AUTHORITY_TASKS: tasksFile,
          PAYMENTS_URL: payments.url,
          AGENT_NAME: name,
          APPROVAL_TTL_MS: String(options.approvalTtlMs),
          LEASE_MS: String(LEASE_MS),
        },
        onEvent: (_child, event) => events.push(event),
      });
      agents.set(name, child);
      return child;
    };
    await Promise.all(["agent-a", "agent-b"].map(startAgent));
    log(
      `authority: ${plan.length} tasks on ${storeName(options.location)}, two agents, seed ${options.seed}`,
    );

    // Approvers: look for requests, decide each after a delay, as its plan says.
    const approvals = new Approvals(approverA, approverB, byChargeKey, random.fork("approvers"));
    let stopping = false;
    const approving = (async () => {
      while (!stopping) {
        await approvals.poll();
        await sleep(100);
      }
    })();

    // The operator: cancels each task its plan names, at its moment, and notes when the cancel returned.
    const cancels = new Map<string, { returnedAt: number; running: Set<string> }>();
    const cancelling = Promise.all(
      plan
        .filter((task) => task.cancelAfterMs !== undefined)
        .map(async (task) => {
          await sleep(task.cancelAfterMs ?? 0);
          for (;;) {
            try {
              const outcome = await operatorSide.cancel(
                { taskId: task.taskId },
                { by: "chaos-operator", why: "the plan cancels this task" },
              );
              cancels.set(task.taskId, { returnedAt: Date.now(), running: new Set(outcome.running) });
              return;
            } catch (error) {
              if (!OnceError.is(error, "ONCE_STORE_UNAVAILABLE")) throw error;
              await sleep(100);
            }
          }
        }),
    );

    // The faults: SIGKILL an agent at random moments, restart it a moment later; it resumes every task.
    let agentKills = 0;
    const killGap = options.durationMs / (options.kills + 1);
    for (let i = 0; i < options.kills; i++) {
      await sleep(random.int(Math.floor(killGap / 2), Math.floor(killGap * 1.5)));
      const name = random.pick(["agent-a", "agent-b"]);
      await agents.get(name)?.kill("SIGKILL");
      agentKills++;
      await sleep(random.int(50, 500));
      await startAgent(name);
    }
    await cancelling;

    // The end: both agents have an answer for every task (the ignored requests expire meanwhile).
    const deadline = options.approvalTtlMs + 60_000;
    await Promise.all(
      [...agents.values()].map((agent) => agent.waitFor("finished", { timeoutMs: deadline })),
    );
    stopping = true;
    await approving;

    const report = await judge({
      options,
      plan,
      approvals,
      cancels,
      events,
      agentKills,
      payments: new PaymentsClient(payments.url),
    });
    return { ...report, durationMs: Date.now() - started };
  } finally {
    await Promise.all([...agents.values()].map((agent) => agent.stop()));
    await payments.stop();
    await Promise.all(opened.map((o) => o.close()));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The two approvers: each request decided once, after a delay, as the task's plan says. */
class Approvals {
  readonly approved = new Set<string>();
  readonly denied = new Set<string>();
  races = 0;
  racesBothAccepted = 0;
  /** Decisions that neither went through nor were refused (the store did not answer): reported. */
  readonly errors: string[] = [];
  /** Request times seen per key: more than one means the request was made again. */
  readonly requestTimes = new Map<string, Set<number>>();
  readonly #scheduled = new Set<string>();
  readonly #pending: Promise<void>[] = [];

  constructor(
    readonly a: OperatorStore,
    readonly b: OperatorStore,
    readonly tasks: Map<string, AuthorityTask>,
    readonly random: Random,
  ) {}

  async poll(): Promise<void> {
    let page: Awaited<ReturnType<OperatorStore["list"]>>;
    try {
      page = await this.a.list({ states: ["awaiting_approval"], limit: 10_000 });
    } catch {
      return; // The store was unreachable for a moment: look again next time.
    }
    for (const record of page.records) {
      if (record.approval === undefined) continue;
      const times = this.requestTimes.get(record.key) ?? new Set<number>();
      times.add(record.approval.requestedAt);
      this.requestTimes.set(record.key, times);
      const task = this.tasks.get(record.key);
      if (task?.approval === undefined || task.approval === "ignore" || this.#scheduled.has(record.key))
        continue;
      this.#scheduled.add(record.key);
      const delay = this.random.int(100, 1_500);
      this.#pending.push(
        sleep(delay)
          .then(() => this.#decide(record.key, task))
          .catch((error: unknown) => {
            this.errors.push(`decision for ${task.taskId} failed: ${String(error)}`);
          }),
      );
    }
  }

  async #decide(key: string, task: AuthorityTask): Promise<void> {
    const approve = (operator: OperatorStore, by: string) =>
      accepted(operator.approve(key, { by, why: `approved by plan (${task.orderId})` }));
    const deny = (operator: OperatorStore, by: string) =>
      accepted(operator.deny(key, { by, why: `denied by plan (${task.orderId})` }));
    if (task.approval === "approve") {
      if (await approve(this.a, "approver-a")) this.approved.add(key);
    } else if (task.approval === "deny") {
      if (await deny(this.b, "approver-b")) this.denied.add(key);
    } else if (task.approval === "race") {
      this.races++;
      const [yes, no] = await Promise.all([approve(this.a, "approver-a"), deny(this.b, "approver-b")]);
      if (yes) this.approved.add(key);
      if (no) this.denied.add(key);
      if (yes && no) this.racesBothAccepted++;
    }
  }

  settled(): Promise<unknown> {
    return Promise.all(this.#pending);
  }
}

/** True when the store took the decision; a refusal (the record moved on: cancelled, decided) is false. */
async function accepted(decision: Promise<unknown>): Promise<boolean> {
  try {
    await decision;
    return true;
  } catch (error) {
    if (OnceError.is(error, "ONCE_DECISION_REFUSED")) return false;
    throw error;
  }
}

async function judge(input: {
  options: AuthorityOptions;
  plan: AuthorityTask[];
  approvals: Approvals;
  cancels: Map<string, { returnedAt: number; running: Set<string> }>;
  events: ChildEvent[];
  agentKills: number;
  payments: PaymentsClient;
}): Promise<Omit<AuthorityReport, "durationMs">> {
  const { plan, approvals, cancels, events } = input;
  await approvals.settled();
  const details: string[] = [...approvals.errors];
  const [charges, emails] = await Promise.all([input.payments.findCharges(), input.payments.findEmails()]);
  const effectsByKey = new Map<string, { startedAt: number }[]>();
  for (const effect of [...charges, ...emails]) {
    const key = effect.metadata.once_key ?? "";
    const list = effectsByKey.get(key) ?? [];
    list.push({ startedAt: Number(effect.metadata.once_started_at) });
    effectsByKey.set(key, list);
  }

  let duplicateEffects = 0;
  for (const [key, list] of effectsByKey) {
    if (list.length > 1) {
      duplicateEffects += list.length - 1;
      details.push(`duplicate: ${list.length} effects for key ${key}`);
    }
  }

  const requested = new Map<string, number>();
  for (const event of events) {
    if (event.e === "requested")
      requested.set(String(event.key), (requested.get(String(event.key)) ?? 0) + 1);
  }
  let approvalsAskedTwice = 0;
  for (const [key, n] of requested)
    if (n > 1 || (approvals.requestTimes.get(key)?.size ?? 0) > 1) approvalsAskedTwice++;

  let effectsWithoutApproval = 0;
  let effectsPerApprovalMax = 0;
  let effectsAfterDeny = 0;
  let effectsAfterCancel = 0;
  let runningAtCancel = 0;
  let lost = 0;
  const ends: Record<TaskEnd, number> = { done: 0, denied: 0, expired: 0, cancelled: 0 };
  for (const task of plan) {
    const chargeKey = deriveKey({ taskId: task.taskId, stepId: CHARGE_STEP });
    const receiptKey = deriveKey({ taskId: task.taskId, stepId: RECEIPT_STEP });
    const charged = effectsByKey.get(chargeKey)?.length ?? 0;
    if (task.approval !== undefined) {
      if (approvals.approved.has(chargeKey)) effectsPerApprovalMax = Math.max(effectsPerApprovalMax, charged);
      else if (charged > 0) {
        effectsWithoutApproval += charged;
        details.push(`charged without an approval: ${task.taskId} (${task.approval})`);
      }
      if (approvals.denied.has(chargeKey) && charged > 0) {
        effectsAfterDeny += charged;
        details.push(`charged after a deny: ${task.taskId}`);
      }
    }
    const cancel = cancels.get(task.taskId);
    if (cancel !== undefined) {
      runningAtCancel += cancel.running.size;
      for (const key of [chargeKey, receiptKey]) {
        if (cancel.running.has(key)) continue;
        const late = (effectsByKey.get(key) ?? []).filter((effect) => effect.startedAt > cancel.returnedAt);
        effectsAfterCancel += late.length;
        if (late.length > 0) details.push(`effect after cancel: ${task.taskId} key ${key}`);
      }
    }
    // The last answer each agent printed for the task; "done" must be backed by both effects at the provider.
    const answers = events.filter((event) => event.e === "end" && event.taskId === task.taskId);
    const last = answers.at(-1)?.end as TaskEnd | undefined;
    if (last === undefined) {
      lost++;
      details.push(`no answer: ${task.taskId}`);
      continue;
    }
    ends[last]++;
    if (
      answers.some((a) => a.end === "done") &&
      (charged === 0 || (effectsByKey.get(receiptKey)?.length ?? 0) === 0)
    ) {
      lost++;
      details.push(`answered done with an effect missing at the provider: ${task.taskId}`);
    }
  }

  return {
    seed: input.options.seed,
    store: storeName(input.options.location),
    tasks: plan.length,
    agentKills: input.agentKills,
    approvalsRequested: requested.size,
    approvalsAskedTwice,
    approved: approvals.approved.size,
    denied: approvals.denied.size,
    races: approvals.races,
    racesBothAccepted: approvals.racesBothAccepted,
    effectsWithoutApproval,
    effectsPerApprovalMax,
    effectsAfterDeny,
    cancels: cancels.size,
    runningAtCancel,
    effectsAfterCancel,
    duplicateEffects,
    lost,
    ends,
    details,
  };
}

/** What a run broke, one line per broken guarantee; empty when it held them all. */
export function authorityVerdict(report: AuthorityReport): string[] {
  const failures: string[] = [];
  const zero = [
    "approvalsAskedTwice",
    "racesBothAccepted",
    "effectsWithoutApproval",
    "effectsAfterDeny",
    "effectsAfterCancel",
    "duplicateEffects",
    "lost",
  ] as const;
  for (const field of zero) if (report[field] !== 0) failures.push(`${field} = ${report[field]}, must be 0`);
  if (report.effectsPerApprovalMax > 1)
    failures.push(`effectsPerApprovalMax = ${report.effectsPerApprovalMax}, must be at most 1`);
  if (report.approvalsRequested === 0) failures.push("no approval was requested: the run tested nothing");
  if (report.cancels === 0) failures.push("no task was cancelled: the run tested nothing");
  return failures;
}

/** The run's one line, after the other summary lines of `pnpm test:chaos`. */
export function authoritySummary(report: AuthorityReport): string {
  return (
    `chaos[authority]: store=${report.store} seed=${report.seed} tasks=${report.tasks} kills=${report.agentKills} ` +
    `approvals=${report.approvalsRequested} approved=${report.approved} denied=${report.denied} expired=${report.ends.expired} ` +
    `races=${report.races} cancels=${report.cancels} running_at_cancel=${report.runningAtCancel} asked_twice=${report.approvalsAskedTwice} without_approval=${report.effectsWithoutApproval} ` +
    `per_approval_max=${report.effectsPerApprovalMax} after_deny=${report.effectsAfterDeny} ` +
    `after_cancel=${report.effectsAfterCancel} duplicates=${report.duplicateEffects} lost=${report.lost}`
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
