import { readdirSync, statSync, truncateSync } from "node:fs";
import path from "node:path";

/** How often the sizes are taken, and how many samples are kept (10 s of them). */
const SAMPLE_EVERY_MS = 50;
const SAMPLES_KEPT = 200;

/**
 * The sizes of a Redis' incremental AOF files, taken every 50 ms, so that an emulated OS crash can cut each
 * file back to what it held some time before the kill: the writes that a crash under `appendfsync everysec`
 * loses never reached the disk, while a SIGKILL alone loses nothing (the kernel still holds them).
 */
export class AofTail {
  readonly #dir: string;
  readonly #samples: { at: number; sizes: Map<string, number> }[] = [];
  readonly #timer: NodeJS.Timeout;

  /** Starts sampling the AOF of the Redis whose working directory is `redisDir`. */
  constructor(redisDir: string) {
    this.#dir = path.join(redisDir, "appendonlydir");
    this.#timer = setInterval(() => this.#sample(), SAMPLE_EVERY_MS);
  }

  /**
   * Truncates every incremental AOF file to its size in the last sample taken at or before `cutoff` (to
   * nothing if there is none); returns how many bytes were dropped. Redis must be down.
   */
  dropSince(cutoff: number): number {
    const before = [...this.#samples].reverse().find((sample) => sample.at <= cutoff);
    let dropped = 0;
    for (const name of this.#files()) {
      const file = path.join(this.#dir, name);
      const now = statSync(file).size;
      const then = before?.sizes.get(name) ?? 0;
      if (then < now) {
        truncateSync(file, then);
        dropped += now - then;
      }
    }
    return dropped;
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  #files(): string[] {
    return readdirSync(this.#dir).filter((name) => name.endsWith(".incr.aof"));
  }

  #sample(): void {
    try {
      const sizes = new Map<string, number>();
      for (const name of this.#files()) sizes.set(name, statSync(path.join(this.#dir, name)).size);
      this.#samples.push({ at: Date.now(), sizes });
      if (this.#samples.length > SAMPLES_KEPT) this.#samples.shift();
    } catch {
      // Redis is between a kill and a restart.
    }
  }
}
