import { taskId } from "../protocol.js";

/** The service the bench registers: one handler, a task of `k` steps. */
export const RESTATE_SERVICE = "peers";

/** Tells restate-server where the service is (the admin API's `POST /deployments`). */
export async function registerDeployment(adminUrl: string, uri: string): Promise<void> {
  const response = await fetch(`${adminUrl}/deployments`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ uri }),
  });
  if (!response.ok)
    throw new Error(`registering ${uri} with restate-server: ${response.status} ${await response.text()}`);
}

/** One task as one invocation through the ingress, its task id as idempotency key; resolves with its end. */
export async function invokeTask(ingressUrl: string, runId: string, n: number, k: number): Promise<void> {
  const response = await fetch(`${ingressUrl}/${RESTATE_SERVICE}/task`, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": taskId(runId, n) },
    body: JSON.stringify({ n, k }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`task ${n} through restate: ${response.status} ${text}`);
}
