// `node dist/agent/approvals/approver.js --mode naive|once --redis-url URL --prefix P --task-prefix ID
//   [--delay-ms 2000]`
// The approvals demo's person, in a process of its own that the demo never kills: it finds every approval
// request, decides each `--delay-ms` after it first saw it, and cancels one task. once: the requests are the
// records awaiting approval, read and decided through the operator store (RedisOperatorStore list, approve,
// deny, cancel), as `once approve` would. naive: the requests are what the orchestrator sent it (a Redis list),
// its answers go back by the AI SDK's approvalId, and its cancel is published to the orchestrator running
// then. It decides by the order: the first task it is asked about is cancelled; an order whose number is a
// multiple of 3 is denied; any other approved. stdout is JSON lines — `ready`, then `asked` for each request
// as first seen, `decided` for each decision and `cancelled` for the cancel — which the demo counts: what it
// was asked and what it decided, stamped with this process's clock just before it acted.
import { parseArgs } from "node:util";
import { keyLayout } from "@once/order-agent";
import { RedisOperatorStore } from "@once/redis";
import { Redis } from "ioredis";
import { type NaiveApprovalRequest, naiveApprovalKeys, taskNumberOf } from "./approval-keys.js";
import { readReason } from "./charge-approval.js";

function fail(message: string): never {
  process.stderr.write(`approver: ${message}\n`);
  process.exit(2);
}

const { values: args } = (() => {
  try {
    return parseArgs({
      options: {
        mode: { type: "string" },
        "redis-url": { type: "string" },
        prefix: { type: "string" },
        "task-prefix": { type: "string" },
        "delay-ms": { type: "string", default: "2000" },
      },
    });
  } catch (error) {
    fail((error as Error).message);
  }
})();
const mode = args.mode === "naive" || args.mode === "once" ? args.mode : fail("--mode must be naive or once");
if (!args["redis-url"] || !args.prefix || !args["task-prefix"])
  fail("--redis-url, --prefix and --task-prefix are required");
const delayMs = Number(args["delay-ms"]);
if (!Number.isSafeInteger(delayMs) || delayMs < 0) fail(`--delay-ms must be an integer ≥ 0`);
const taskPrefix = args["task-prefix"];
const layout = keyLayout(args.prefix);

const emit = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);
const BY = "approver@example.com";

/** One request as the approver saw it: `id` is the record's key (once) or the AI SDK's approvalId (naive). */
interface Seen {
  id: string;
  taskId: string;
  orderId: string;
  amount: number;
}

let cancelledTask: string | undefined;
type Decision = "approve" | "deny" | "cancel";
function decide(request: Seen): Decision {
  if (cancelledTask === undefined) {
    cancelledTask = request.taskId;
    return "cancel";
  }
  // A person asked again about a task they cancelled says no.
  if (request.taskId === cancelledTask) return "deny";
  return taskNumberOf(request.orderId) % 3 === 0 ? "deny" : "approve";
}

const redis = new Redis(args["redis-url"], { maxRetriesPerRequest: null });
const operator = new RedisOperatorStore({ redis, prefix: layout.store });
const keys = naiveApprovalKeys(layout);

/** How the decision reaches the call: the record (once), or the process that asked (naive). */
async function act(request: Seen, decision: Decision, key: string | undefined): Promise<string> {
  const why =
    decision === "cancel"
      ? "the customer cancelled the order"
      : decision === "deny"
        ? "over the customer's limit"
        : "customer confirmed";
  if (mode === "once") {
    if (decision === "cancel") {
      const cancel = await operator.cancel({ taskId: request.taskId }, { by: BY, why });
      return cancel.outcome;
    }
    const decided = decision === "approve" ? operator.approve : operator.deny;
    try {
      await decided.call(operator, key as string, { by: BY, why });
      return "decided";
    } catch (error) {
      return `refused: ${error instanceof Error ? error.message : String(error)}`;
    }
  }
  if (decision === "cancel") {
    const heard = await redis.publish(keys.cancels, request.taskId);
    return `published to ${heard} orchestrator${heard === 1 ? "" : "s"}`;
  }
  await redis.hset(keys.answers, request.id, decision === "approve" ? "approved" : "denied");
  return "decided";
}

function schedule(request: Seen, key?: string): void {
  emit({ type: "asked", ...request, at: Date.now() });
  setTimeout(() => {
    const decision = decide(request);
    const at = Date.now();
    act(request, decision, key).then(
      (outcome) =>
        emit(
          decision === "cancel"
            ? { type: "cancelled", ...request, at, returnedAt: Date.now(), outcome }
            : {
                type: "decided",
                ...request,
                decision: decision === "approve" ? "approved" : "denied",
                at,
                outcome,
              },
        ),
      (error: unknown) => emit({ type: "error", ...request, error: String(error) }),
    );
  }, delayMs);
}

/** once: each record awaiting approval, by key and request time (a second request on one record is seen). */
const seenRequests = new Set<string>();
async function pollRecords(): Promise<void> {
  for (let cursor: string | undefined, first = true; first || cursor !== undefined; first = false) {
    const page = await operator.list({
      states: ["awaiting_approval"],
      limit: 200,
      ...(cursor ? { cursor } : {}),
    });
    for (const record of page.records) {
      const request = record.approval;
      const named = request && readReason(request.reason);
      const seen = `${record.key}@${request?.requestedAt}`;
      if (!request || !named || seenRequests.has(seen)) continue;
      seenRequests.add(seen);
      schedule(
        { id: record.key, taskId: `${taskPrefix}-${taskNumberOf(named.orderId)}`, ...named },
        record.key,
      );
    }
    cursor = page.cursor;
  }
}

/** naive: each request the orchestrator sent. */
async function pollInbox(): Promise<void> {
  for (;;) {
    const text = await redis.lpop(keys.requests);
    if (text === null) return;
    const request = JSON.parse(text) as NaiveApprovalRequest;
    const named = readReason(request.reason);
    if (named) schedule({ id: request.approvalId, taskId: request.taskId, ...named });
  }
}

let stopping = false;
process.once("SIGTERM", () => {
  stopping = true;
});
emit({ type: "ready" });
while (!stopping) {
  try {
    await (mode === "once" ? pollRecords() : pollInbox());
  } catch (error) {
    process.stderr.write(`approver: ${error instanceof Error ? error.message : String(error)}\n`);
  }
  await new Promise((resolve) => setTimeout(resolve, 100));
}
redis.disconnect();
process.exit(0);
