/**
 * The figures of one mode of the agent demo (`pnpm demo -- --agent`), every one measured, none modelled.
 * Counts made inside the orchestrator process go to Redis as they happen, so a SIGKILL loses none of them.
 */
export interface AgentFigures {
  /** The agent framework whose own loop ran the tasks (`--framework`). */
  framework: string;
  mode: "naive" | "once";
  /** Order tasks run to the end (across restarts): ok, or failed with an error the loop threw. */
  tasks: number;
  tasksOk: number;
  tasksFailed: number;
  /** Times the demo SIGKILLed the orchestrator process (it was restarted with the unfinished tasks). */
  orchestratorKills: number;
  /**
   * Tool calls the framework's loop executed, counted by the orchestrator as each starts (in Redis): each once,
   * however often it was re-sent. A task restarted after a kill counts its calls again (naive asks the model
   * anew; once replays the recorded turns' calls, answered from the store).
   */
  toolCalls: number;
  /** Re-sends of a tool call after its wait timed out (the orchestrator's retry), counted the same way. */
  toolCallsResent: number;
  /** One charge and one email per order. */
  chargesExpected: number;
  /** By the payments provider's ledger, after the last orchestrator exited. */
  chargesMade: number;
  /** Charges beyond one per order (ledger). */
  chargesDuplicate: number;
  /** Orders the ledger holds no charge for. */
  chargesMissing: number;
  emailsExpected: number;
  emailsSent: number;
  /** Emails beyond one per order (ledger). */
  duplicateEmails: number;
  /** chargesDuplicate + duplicateEmails. */
  duplicateEffects: number;
  /** Answers the model gave, counted by the model as it answers (a Redis hash field per task and turn). */
  modelCalls: number;
  /**
   * Answers for a turn whose earlier answer had already reached the loop (it acted on it): the same turn
   * asked again, its tokens paid twice. What a restarted naive task does from its first turn; for once, a
   * recorded turn asked again — 0 unless once is broken.
   */
  modelCallsRepeated: number;
  /**
   * Answers for a turn whose earlier answer never reached the loop: the orchestrator was killed between the
   * model's answer and the loop taking it (for once, before the turn was recorded). Asking again is right
   * then — no call of that answer went out — but its tokens were paid twice too.
   */
  modelCallsCutOff: number;
  /** Errors of once (IdempotencyConflictError and the other OnceErrors) seen by tasks or their tool calls. */
  conflicts: number;
  /** Per task, from its first start to its finish across restarts, by the demo's own clock. */
  p50TaskMs: number;
  p99TaskMs: number;
  /** From the first orchestrator's start to the last task's finish. */
  wallMs: number;
}
