/**
 * Verbs that, leading a tool's name, say the call changes the outside world in a way a repeat would repeat:
 * money moves, messages go out, things are created, removed or started. A `read` or `write` tool named with
 * one of them is flagged by `once audit`: retried freely, it would repeat its effect.
 *
 * Left out on purpose:
 * - `set`, `put`, `update`, `upsert`, `save`, `mark`, `assign`: setting a value to the same value twice
 *   changes nothing, which is what `write` is for (set_status). A name cannot tell `update_address`
 *   (idempotent) from `update_balance_by` (not), so those are for a review, not a flag.
 * - Words that often start a read tool's name as nouns (`order_status`, `credit_score`, `open_issues`,
 *   `message_history`), to keep the flag worth reading. `--allow <tool>` accepts a reviewed exception.
 */
export const SIDE_EFFECT_VERBS: readonly string[] = [
  // money moves
  ...["charge", "pay", "refund", "transfer", "withdraw", "deposit", "payout", "capture", "purchase", "buy"],
  ...["checkout", "reserve", "book"],
  // messages go out
  ...["send", "email", "sms", "notify", "post", "publish", "tweet", "reply", "invite"],
  // things are made, removed or started
  ...["create", "insert", "add", "append", "increment", "decrement", "submit", "grant", "revoke", "delete"],
  ...["remove", "destroy", "cancel", "deploy", "provision", "launch", "trigger", "execute", "enqueue"],
  ...["schedule", "upload", "ship", "fulfill", "mint"],
];

/**
 * The side-effect verb that leads `name` or one of its dot-separated parts (`send_email`, `sendEmail`,
 * `stripe.charge_card`, `Create-Ticket`), or undefined.
 */
export function sideEffectVerb(name: string): string | undefined {
  for (const part of name.split(".")) {
    const first = part
      .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
      .split(/[_\-\s]+/)
      .find((word) => word !== "")
      ?.toLowerCase();
    if (first !== undefined && SIDE_EFFECT_VERBS.includes(first)) return first;
  }
  return undefined;
}
