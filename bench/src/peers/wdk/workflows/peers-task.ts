// The Workflow DevKit side's task, built at run time by `workflow build` (its "use workflow" and "use step"
// directives need its compiler). Self-contained on purpose: the workflow bundle runs this file's workflow code in
// a sandbox, so it imports nothing of the bench's.
import { getStepMetadata } from "workflow";

/** A task of `k` steps, each one charge at the provider. */
export async function peersTask(providerUrl: string, task: string, k: number): Promise<number> {
  "use workflow";
  for (let i = 0; i < k; i++) await chargeStep(providerUrl, task, i);
  return k;
}

/**
 * One step, as the DevKit's docs have it for side effects: the step's `stepId` (stable across retries) sent as
 * `Idempotency-Key`. The bench's hook on `globalThis` hears that the step's body ended.
 */
async function chargeStep(providerUrl: string, task: string, step: number): Promise<string> {
  "use step";
  const { stepId } = getStepMetadata();
  const order = `${task}-s${step}`;
  const response = await fetch(`${providerUrl}/charges`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-bench-order": order, "idempotency-key": stepId },
    body: JSON.stringify({ amount: 4200, currency: "eur", orderId: order, metadata: {} }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`POST /charges for ${order}: ${response.status} ${text}`);
  (globalThis as { __peersStepDone?: (task: string, step: number) => void }).__peersStepDone?.(task, step);
  return (JSON.parse(text) as { id: string }).id;
}
