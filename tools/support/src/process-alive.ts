import { readFileSync } from "node:fs";

/** True while `pid` names a live process (of any user); a zombie counts as gone. */
export function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    // No /proc (macOS): kill(0) is all there is.
    return true;
  }
}

/**
 * True when `pid` is, as far as /proc tells, a redis-server serving `port` (its title reads
 * `redis-server 127.0.0.1:<port>`, or its arguments hold the port): a recorded pid is signalled only when
 * it still names the server that was recorded, never a process that reused the number. False without /proc.
 */
export function isRedisServerProcess(pid: number, port: number): boolean {
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return false;
  }
  const words = cmdline.split(/[\0 ]+/);
  return (
    cmdline.includes("redis-server") &&
    words.some((word) => word === String(port) || word.endsWith(`:${port}`))
  );
}
