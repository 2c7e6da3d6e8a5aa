import http from "node:http";

// Connections to the provider are kept and reused: a request then leaves on a socket that is already open.
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

/**
 * A provider call that failed. `sent` says whether any byte of the request left this process: if not, the
 * provider cannot have acted, whatever else went wrong.
 */
export class ProviderCallError extends Error {
  override readonly name = "ProviderCallError";

  constructor(
    message: string,
    readonly sent: boolean,
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface PostOptions {
  headers: Record<string, string>;
  /** The JSON body, made right after `beforeWrite` (so it can carry what the check saw). */
  body: () => unknown;
  /** Called right after the request was written. */
  onSent?: () => void;
  /** Aborts the call: before the request is written nothing is sent; after, the provider may have acted. */
  signal: AbortSignal;
  /**
   * Runs on a connected socket immediately before the request is written, in the same synchronous stretch
   * of code as the write itself; throw to send nothing. This is where an owner looks at its lease last.
   */
  beforeWrite: () => void;
}

/**
 * POSTs JSON and resolves with the status and the parsed body. Unlike `fetch`, whose request goes out some
 * event-loop turns after the call (after a connection is found or opened), the bytes leave here right
 * after `beforeWrite` returns: a process frozen anywhere before that check sends nothing when it thaws
 * without passing the check again.
 */
export function postJson(url: string, options: PostOptions): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    let sent = false;
    let settled = false;
    const fail = (error: ProviderCallError) => {
      if (settled) return;
      settled = true;
      options.signal.removeEventListener("abort", onAbort);
      reject(error);
    };
    const req = http.request(url, {
      method: "POST",
      agent,
      headers: { ...options.headers, "Content-Type": "application/json" },
    });
    const onAbort = () => {
      fail(
        new ProviderCallError(
          sent ? "aborted after the request was sent; the provider may have acted" : "aborted before sending",
          sent,
          undefined,
          { cause: options.signal.reason },
        ),
      );
      req.destroy();
    };
    if (options.signal.aborted) {
      onAbort();
      return;
    }
    options.signal.addEventListener("abort", onAbort, { once: true });
    req.on("socket", (socket) => {
      const write = () => {
        if (settled) return;
        try {
          options.signal.throwIfAborted();
          options.beforeWrite();
        } catch (error) {
          // Nothing was written: the provider never heard of this request.
          fail(
            new ProviderCallError(`not sent: ${(error as Error).message}`, false, undefined, {
              cause: error,
            }),
          );
          req.destroy();
          return;
        }
        const payload = JSON.stringify(options.body());
        req.setHeader("Content-Length", String(Buffer.byteLength(payload)));
        sent = true;
        req.end(payload);
        options.onSent?.();
      };
      if (socket.connecting) socket.once("connect", write);
      else write();
    });
    req.on("error", (error) => {
      fail(
        new ProviderCallError(
          sent ? `connection lost after sending: ${error.message}` : `not sent: ${error.message}`,
          sent,
          undefined,
          { cause: error },
        ),
      );
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("error", (error) =>
        fail(
          new ProviderCallError(`answer cut short: ${error.message}`, true, res.statusCode, { cause: error }),
        ),
      );
      res.on("end", () => {
        if (settled) return;
        settled = true;
        options.signal.removeEventListener("abort", onAbort);
        const text = Buffer.concat(chunks).toString("utf8");
        let json: unknown;
        try {
          json = text === "" ? undefined : JSON.parse(text);
        } catch {
          json = text;
        }
        resolve({ status: res.statusCode ?? 0, json });
      });
    });
  });
}
