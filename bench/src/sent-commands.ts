import { Redis } from "ioredis";

type SendCommand = (this: Redis, command: { name: string }, ...rest: unknown[]) => unknown;

let counts: Map<Redis, Map<string, number>> | undefined;

/**
 * Counts the commands each ioredis client of this process writes to its socket (pipelined ones included):
 * the round trips, as opposed to what Redis runs inside scripts. Wraps `Redis.prototype.sendCommand` once.
 */
export function countSentCommands(): { take(): Map<Redis, Map<string, number>> } {
  if (counts === undefined) {
    counts = new Map();
    const original = Redis.prototype.sendCommand as unknown as SendCommand;
    (Redis.prototype as unknown as { sendCommand: SendCommand }).sendCommand = function (command, ...rest) {
      const byName = counts?.get(this) ?? new Map<string, number>();
      counts?.set(this, byName);
      byName.set(command.name, (byName.get(command.name) ?? 0) + 1);
      return original.call(this, command, ...rest);
    };
  }
  return {
    take() {
      const taken = counts ?? new Map();
      counts = new Map();
      return taken;
    },
  };
}
