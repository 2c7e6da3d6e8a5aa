import type { Redis } from "ioredis";
import { redisCpuSeconds } from "./server-stats.js";

/** Where the time went while one side ran: wall clock, this process's CPU and event loop, Redis's CPU. */
export interface Usage {
  seconds: number;
  /** CPU seconds of this Node process per wall second (1 = one core busy). */
  nodeCpu: number;
  /** Event-loop utilisation of this process, 0..1. */
  eventLoop: number;
  /** CPU seconds of the Redis server per wall second. */
  redisCpu: number;
}

/** Runs `fn` and reports its usage; `probe` is a client used for nothing else while `fn` runs. */
export async function withUsage<T>(probe: Redis, fn: () => Promise<T>): Promise<{ value: T; usage: Usage }> {
  const redisBefore = await redisCpuSeconds(probe);
  const eluBefore = performance.eventLoopUtilization();
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const value = await fn();
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const elu = performance.eventLoopUtilization(eluBefore);
  const redisAfter = await redisCpuSeconds(probe);
  return {
    value,
    usage: {
      seconds,
      nodeCpu: (cpu.user + cpu.system) / 1e6 / seconds,
      eventLoop: elu.utilization,
      redisCpu: (redisAfter - redisBefore) / seconds,
    },
  };
}
