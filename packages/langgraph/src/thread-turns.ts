import type { AIMessage, BaseMessage } from "@langchain/core/messages";
import { AgentTask, type AgentTaskOptions, RecordedTurnMismatchError } from "@once/agent";
import { markOf, type RecordedTurn, recordMessage, type TurnMark, toolCallsOf } from "./recorded-turn.js";

/** A recorded AI message of the thread, with its mark. */
interface Marked {
  message: AIMessage;
  mark: TurnMark & { id: string };
}

/**
 * One thread's turns in this process: an AgentTask (taskId = the thread id) brought to the place in the thread
 * that a node runs at. AgentTask counts turns from 0 in the order they are asked; a LangGraph node runs from a
 * checkpoint, in the middle of the thread. So before a model call or a tool call, the turns the thread's
 * messages hold are replayed into the task, in order, from the store (each is one read; the model is not asked):
 * then the task's next turn is the thread's next, and each recorded call has its step. When the messages went
 * back (a lost checkpoint, a re-run) the task is built again from them.
 */
export class ThreadTurns {
  readonly #options: Omit<AgentTaskOptions, "taskId">;
  readonly taskId: string;
  #task: AgentTask;
  /** The message id of each turn replayed or asked in #task, by turn. */
  #turns: string[] = [];
  /** Runs one change of the thread's place at a time: parallel tool calls and turns of one thread queue here. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(taskId: string, options: Omit<AgentTaskOptions, "taskId">) {
    this.taskId = taskId;
    this.#options = options;
    this.#task = new AgentTask({ ...options, taskId });
  }

  /** One at a time per thread, in call order. */
  exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(work, work);
    this.#queue = run.catch(() => {});
    return run;
  }

  /**
   * The task, at the turn a model asked `prompt` is at: every recorded turn the prompt holds replayed, none
   * beyond. Call inside `exclusive`, and `asked` after the turn.
   */
  async atTurnOf(prompt: readonly BaseMessage[]): Promise<{ task: AgentTask; turn: number }> {
    const held = this.#marked(prompt);
    if (this.#turns.length > held.length) this.#reset();
    await this.#follow(held);
    return { task: this.#task, turn: this.#turns.length };
  }

  /** The turn `atTurnOf` positioned the task at was asked and recorded as `message`. */
  asked(message: BaseMessage): void {
    const [marked] = this.#marked([message]);
    if (marked) this.#turns.push(marked.mark.id);
  }

  /**
   * The task, with every recorded turn among `messages` replayed (a tool node's state, or the messages a
   * functional task was given and returned): then each call those turns made has its step.
   */
  async holding(messages: readonly BaseMessage[]): Promise<AgentTask> {
    await this.#follow(this.#marked(messages));
    return this.#task;
  }

  /** The task as it stands, for a call whose turn was replayed earlier in this process (a functional task). */
  get task(): AgentTask {
    return this.#task;
  }

  /** Starts over: the next call is a run of its own (after a call left unsettled, say). */
  forget(): void {
    this.#reset();
  }

  #reset(): void {
    this.#task = new AgentTask({ ...this.#options, taskId: this.taskId });
    this.#turns = [];
  }

  /** The thread's recorded AI messages among `messages`, in order, each turn once. */
  #marked(messages: readonly BaseMessage[]): Marked[] {
    const found: Marked[] = [];
    for (const message of messages) {
      const mark = markOf(message, this.taskId);
      if (mark && !found.some((m) => m.mark.turn === mark.turn))
        found.push({ message: message as AIMessage, mark });
    }
    return found.sort((a, b) => a.mark.turn - b.mark.turn);
  }

  /** Replays the turns of `held` the task has not seen; builds it again if it saw others in their place. */
  async #follow(held: readonly Marked[]): Promise<void> {
    const first = held[0]?.mark.turn ?? 0;
    const diverged = held.some(({ mark }) => {
      const seen = this.#turns[mark.turn];
      return seen !== undefined && seen !== mark.id;
    });
    if (diverged || first > this.#turns.length) {
      if (first > 0) {
        // The messages start in the middle of the thread (a trimmed history): the turns before them cannot be
        // replayed, since what they were asked is known only from their own messages.
        throw new RecordedTurnMismatchError(
          this.taskId,
          first - 1,
          "model_turn",
          "is missing from the messages the graph holds: every recorded turn of the thread must stay in its history, in order",
        );
      }
      this.#reset();
    }
    for (const { message, mark } of held) {
      if (mark.turn < this.#turns.length) continue;
      if (mark.turn > this.#turns.length)
        throw new RecordedTurnMismatchError(
          this.taskId,
          this.#turns.length,
          "model_turn",
          "is missing from the messages the graph holds: every recorded turn of the thread must stay in its history, in order",
        );
      // From the store; if the record is gone (past retention), the checkpoint's message is the turn.
      await this.#task.turn<RecordedTurn>(mark.request, async () => recordMessage(message), toolCallsOf);
      this.#turns.push(mark.id);
    }
  }
}
