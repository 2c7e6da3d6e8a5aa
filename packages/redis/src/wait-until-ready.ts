import { StoreUnavailableError } from "@once/core";
import type { Cluster, Redis } from "ioredis";

/**
 * Resolves once `client` is ready for commands (connecting it if it was created with `lazyConnect`), or
 * rejects with {@link StoreUnavailableError} after `timeoutMs` or when the client has given up.
 */
export async function waitUntilReady(
  client: Redis | Cluster,
  timeoutMs: number,
  operation: string,
): Promise<void> {
  if (client.status === "ready") return;
  if (client.status === "end") {
    throw new StoreUnavailableError(operation, {
      cause: new Error("the Redis client was closed (status end)"),
    });
  }
  // connect()'s own rejection is reported through the events below.
  if (client.status === "wait") client.connect().catch(() => {});
  await new Promise<void>((resolve, reject) => {
    let lastError: unknown;
    const onReady = () => settle();
    const onError = (error: unknown) => {
      lastError = error;
    };
    const onEnd = () => settle("the Redis client gave up reconnecting (status end)");
    const timer = setTimeout(
      () => settle(`Redis was not ready within ${timeoutMs} ms (status ${client.status})`),
      timeoutMs,
    );
    function settle(failure?: string) {
      clearTimeout(timer);
      client.off("ready", onReady);
      client.off("error", onError);
      client.off("end", onEnd);
      if (failure === undefined) resolve();
      else reject(new StoreUnavailableError(operation, { cause: new Error(failure, { cause: lastError }) }));
    }
    client.on("ready", onReady);
    client.on("error", onError);
    client.on("end", onEnd);
  });
}
