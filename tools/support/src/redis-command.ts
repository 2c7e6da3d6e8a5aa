import net from "node:net";

export interface RedisCommandOptions {
  /** How long to wait for the reply (default 2 s). */
  timeoutMs?: number;
  /** Sent with AUTH before the command. */
  password?: string;
  username?: string;
}

type Reply = { value: string | null } | { error: string };

/**
 * Sends one command to the Redis at host:port on a connection of its own, after AUTH when a password is
 * given, and resolves with its reply: a simple or bulk string, an integer's digits, or null. An error reply,
 * a closed connection and a timeout reject. Enough RESP for PING, INFO, CLUSTER INFO and SHUTDOWN, with no
 * client library, so that it also runs before `pnpm install` has built anything else.
 */
export function redisCommand(
  host: string,
  port: number,
  args: readonly string[],
  options: RedisCommandOptions = {},
): Promise<string | null> {
  const timeoutMs = options.timeoutMs ?? 2000;
  const commands: (readonly string[])[] = [];
  if (options.password !== undefined) {
    commands.push(
      options.username ? ["AUTH", options.username, options.password] : ["AUTH", options.password],
    );
  }
  commands.push(args);
  const encoded = commands.map(encode).join("");
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ host, port });
    let buffered = Buffer.alloc(0);
    let settled = false;
    const finish = (error: Error | null, value: string | null = null) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (error) reject(error);
      else resolve(value);
    };
    socket.setTimeout(timeoutMs, () =>
      finish(new Error(`no reply from ${host}:${port} within ${timeoutMs}ms`)),
    );
    socket.on("connect", () => socket.write(encoded));
    socket.on("data", (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      // One whole reply per command sent; the last one is the answer.
      const replies: Reply[] = [];
      let offset = 0;
      while (replies.length < commands.length) {
        const parsed = parseReply(buffered, offset);
        if (!parsed) return;
        replies.push(parsed.reply);
        offset = parsed.end;
      }
      for (const reply of replies) {
        if ("error" in reply) return finish(new Error(`${host}:${port} replied ${reply.error}`));
      }
      const last = replies.at(-1);
      finish(null, last && "value" in last ? last.value : null);
    });
    socket.on("error", (error) => finish(error));
    socket.on("close", () => finish(new Error(`${host}:${port} closed the connection`)));
  });
}

function encode(args: readonly string[]): string {
  return `*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join("")}`;
}

/** Parses the RESP2 reply that starts at `start`; undefined while it is incomplete. */
function parseReply(buffer: Buffer, start: number): { reply: Reply; end: number } | undefined {
  const lineEnd = buffer.indexOf("\r\n", start);
  if (lineEnd < 0) return undefined;
  const type = buffer.toString("latin1", start, start + 1);
  const line = buffer.toString("utf8", start + 1, lineEnd);
  if (type === "+" || type === ":") return { reply: { value: line }, end: lineEnd + 2 };
  if (type === "-") return { reply: { error: line }, end: lineEnd + 2 };
  if (type === "$") {
    const length = Number(line);
    if (length < 0) return { reply: { value: null }, end: lineEnd + 2 };
    const end = lineEnd + 2 + length + 2;
    if (buffer.length < end) return undefined;
    return { reply: { value: buffer.toString("utf8", lineEnd + 2, end - 2) }, end };
  }
  return { reply: { error: `an unexpected RESP reply type ${JSON.stringify(type)}` }, end: buffer.length };
}
