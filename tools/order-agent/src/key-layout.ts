/** Where one deployment (one demo run, one test) keeps everything in Redis, all under one prefix. */
export interface KeyLayout {
  /** The prefix itself: deleting `<root>*` removes every key below. */
  root: string;
  /** RedisStore `prefix`: the dedup records. */
  store: string;
  /** BullMQ `prefix` (BullMQ adds `:<queue>:…`). */
  bull: string;
  /** RedisOrderBook `prefix`. */
  orders: string;
  /** The orchestrator's step journal, one hash per task. */
  journal: string;
  /** The counters hash that measures claim outcomes (see CountingStore). */
  stats: string;
}

/** The key layout under `root`, which should end with ':' (e.g. `once-demo:3f9a0c12:`). */
export function keyLayout(root: string): KeyLayout {
  if (root === "" || /[\s{}*?[\]]/.test(root)) {
    throw new Error(`invalid key prefix ${JSON.stringify(root)}: no spaces, braces or glob characters`);
  }
  return {
    root,
    store: `${root}once:`,
    bull: `${root}bull`,
    orders: `${root}order:`,
    journal: `${root}journal:`,
    stats: `${root}stats`,
  };
}
