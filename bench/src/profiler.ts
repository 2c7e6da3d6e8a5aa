import { mkdirSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import path from "node:path";

/** What V8's CPU profiler returns (`Profiler.stop`), the parts the bench reads (parts.ts). */
export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string }; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
}

/**
 * CPU-profiles only the timed window of a run (not the queue filling around it), writing
 * `<dir>/<name>.cpuprofile` for Chrome DevTools or speedscope, and handing the profile to `take`. A no-op
 * with neither.
 */
export async function profiled<T>(
  dir: string | undefined,
  name: string,
  fn: () => Promise<T>,
  take?: (profile: CpuProfile) => void,
): Promise<T> {
  if (dir === undefined && take === undefined) return fn();
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 100 });
  await session.post("Profiler.start");
  try {
    return await fn();
  } finally {
    const { profile } = await session.post("Profiler.stop");
    if (dir !== undefined) {
      mkdirSync(dir, { recursive: true });
      writeFileSync(
        path.join(dir, `${name.replace(/[^A-Za-z0-9_.-]+/g, "-")}.cpuprofile`),
        JSON.stringify(profile),
      );
    }
    take?.(profile as CpuProfile);
    session.disconnect();
  }
}
