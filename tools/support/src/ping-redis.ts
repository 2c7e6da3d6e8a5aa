import { pollUntil } from "./poll-until.js";
import { type RedisCommandOptions, redisCommand } from "./redis-command.js";

/**
 * True when a Redis answers PING with PONG at host:port within `timeoutMs` (default 500 ms). An error
 * reply counts as no: `-NOAUTH` means a Redis is there, but one that needs the password to be used.
 */
export async function pingRedis(
  host: string,
  port: number,
  options: RedisCommandOptions = {},
): Promise<boolean> {
  try {
    return (await redisCommand(host, port, ["PING"], { timeoutMs: 500, ...options })) === "PONG";
  } catch {
    return false;
  }
}

/**
 * PINGs host:port until it answers (true) or `timeoutMs` has passed (false); `giveUp` returning true ends
 * the wait early (a server process that has exited will not answer).
 */
export function waitForRedis(
  host: string,
  port: number,
  options: { timeoutMs: number; giveUp?: () => boolean } & RedisCommandOptions,
): Promise<boolean> {
  const { timeoutMs, giveUp, ...ping } = options;
  let answered = false;
  return pollUntil(
    async () => {
      if (giveUp?.()) return true;
      answered = await pingRedis(host, port, { timeoutMs: 300, ...ping });
      return answered;
    },
    { timeoutMs },
  ).then(() => answered);
}
