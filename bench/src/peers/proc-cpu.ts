import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

let ticksPerSecond: number | undefined;

/** The kernel's clock ticks per second (`getconf CLK_TCK`), in which /proc reports CPU time. */
function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/**
 * CPU seconds (user + system, every thread) that process `pid` has used, and with `children` also what its
 * reaped children used; undefined once it is gone. Read from /proc/<pid>/stat, so another user's process
 * (PostgreSQL's backends) can be read too. Resolution: one clock tick (10 ms on Linux).
 */
export function processCpuSeconds(pid: number, children = false): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // Fields after the command name (which may hold spaces, so read from the last ')'): state is field 3.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const field = (n: number) => Number(fields[n - 3] ?? 0);
  const ticks = field(14) + field(15) + (children ? field(16) + field(17) : 0);
  return ticks / clockTicks();
}

/**
 * CPU of a changing set of processes between two readings (PostgreSQL backends of one database): a process
 * seen in both readings counts its difference, one that appeared counts all of its CPU, one that went away is
 * lost (pools keep their connections, so few do).
 */
export class ProcessSetCpu {
  #before = new Map<number, number>();

  /** Reads the processes now: the start of the window. */
  start(pids: readonly number[]): void {
    this.#before = new Map();
    for (const pid of pids) {
      const cpu = processCpuSeconds(pid);
      if (cpu !== undefined) this.#before.set(pid, cpu);
    }
  }

  /** CPU seconds the processes (those of `pids`, read now) used since {@link start}. */
  since(pids: readonly number[]): number {
    let total = 0;
    for (const pid of pids) {
      const cpu = processCpuSeconds(pid);
      if (cpu !== undefined) total += cpu - (this.#before.get(pid) ?? 0);
    }
    return total;
  }
}
