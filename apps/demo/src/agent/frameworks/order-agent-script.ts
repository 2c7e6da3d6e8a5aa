// The order agent's script, for the frameworks whose scripted model the demo builds on the framework's own mock
// (the AI SDK's is @once/order-agent's): read the order, then charge it and email the receipt (two calls in
// one turn), then mark it paid, then answer. Nondeterministic on purpose, as a real model is: asked again it
// charges another amount under new call ids.

/** Which turn a prompt asks for, from how many tool results it holds: 0 read, 1 charge and email, 2 set status, 3 answer. */
export function turnOf(toolResults: number): number {
  return [0, 1, 1, 2, 3][toolResults] ?? 3;
}

export interface ScriptedCall {
  id: string;
  name: string;
  input: Record<string, unknown>;
}

/** A model's latency, heavy-tailed as a real one's: mostly 5–25 ms, one call in ten about ten times slower. */
export async function modelLatency(): Promise<void> {
  const ms = Math.random() < 0.9 ? 5 + Math.random() * 20 : 100 + Math.random() * 200;
  await new Promise((resolve) => setTimeout(resolve, ms));
}

/** The answer to `turn`: its tool calls, or the final text. */
export function scriptedAnswer(orderId: string, turn: number): { calls: ScriptedCall[]; text: string } {
  const amount = 1_000 + Math.floor(Math.random() * 9_000);
  const call = (name: string, input: Record<string, unknown>): ScriptedCall => ({
    id: `call_${Math.random().toString(36).slice(2, 10)}`,
    name,
    input,
  });
  const calls =
    turn === 0
      ? [call("get_order_status", { orderId })]
      : turn === 1
        ? [
            call("charge_customer", { orderId, amount, currency: "eur" }),
            call("send_email", {
              orderId,
              to: "customer@example.com",
              subject: `Receipt for ${orderId}`,
              body: `We charged ${(amount / 100).toFixed(2)} EUR for your order.`,
            }),
          ]
        : turn === 2
          ? [call("set_status", { orderId, status: "paid" })]
          : [];
  return { calls, text: turn === 3 ? `order ${orderId} is paid` : "" };
}
