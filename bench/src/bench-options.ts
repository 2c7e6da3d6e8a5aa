import { parseArgs } from "node:util";
import { redisServerBin } from "@once/support";
import { PEER_SIDES, type PeerSide } from "./peers/protocol.js";

export const SECTIONS = [
  "throughput",
  "realistic",
  "tracing",
  "parts",
  "store",
  "roundTrips",
  "memory",
  "latency",
  "scaling",
  "agent",
  "resume",
  "recovery",
  "durability",
  "postgres",
  "peers",
] as const;
export type Section = (typeof SECTIONS)[number];

/** What runs without --only: every section but peers (it starts engines and takes most of an hour). */
const DEFAULT_SECTIONS = SECTIONS.filter((s) => s !== "peers");

export interface BenchOptions {
  /** Where to write the JSON report, if anywhere. */
  jsonPath: string | undefined;
  /** --only was given: an existing JSON report keeps the sections this run does not measure. */
  onlyGiven: boolean;
  /** Use this Redis instead of spawning a throwaway redis-server. */
  redisUrl: string | undefined;
  redisServerBin: string;
  sections: readonly Section[];
  /** Interleaved rounds of the worker comparisons; medians are taken over them. */
  rounds: number;
  /** Interleaved rounds of the store and latency comparisons (short, so more of them). */
  storeRounds: number;
  /** Jobs per throughput side per round. */
  jobs: number;
  /** How long the realistic section's effect waits, in ms (its goal is set for 5). */
  effectMs: number;
  /** Records measured for the memory figure. */
  memoryRecords: number;
  /** How long one side of one store round runs, in ms. */
  storeRoundMs: number;
  /** Write a CPU profile of each timed worker run here. */
  profileDir: string | undefined;
  /** Only these throughput sides (for profiling one of them), e.g. `once`. */
  sides: readonly string[] | undefined;
  /** peers: the sides to run (default every one), rounds of each cell, and tasks killed per side (recovery too). */
  peerSides: readonly PeerSide[];
  peerRounds: number;
  kills: number;
  quick: boolean;
  /**
   * Directory with a pre-change build to run as the "before" side: `redis/` and `bullmq/` dist folders, and
   * `node_modules/@once/core/` (package.json + dist) of the same commit. It must live inside `bench/` (e.g.
   * `bench/baseline`, git-ignored) so bullmq, ioredis and zod resolve from bench/node_modules; without its own
   * `node_modules/@once/core` the "before" side runs the current core. See docs/performance.md.
   */
  baselineDir: string | undefined;
}

const USAGE = `usage: node bench/dist/main.js [--json PATH] [--only SECTION,…] [--rounds N] [--store-rounds N] [--jobs N]
       [--effect-ms MS] [--memory-records N] [--store-round-ms MS] [--redis-url URL] [--baseline DIR] [--sides NAME,…] [--profile-dir DIR]
       [--peers SIDE,…] [--peer-rounds N] [--kills N] [--quick]

sections: ${SECTIONS.join(", ")} (all but peers by default)
With --only, --json PATH writes the sections measured into the report already at PATH and keeps the others.
By default a throwaway redis-server (REDIS_SERVER_BIN, else redis-server on PATH) is started on a free port
and stopped at the end; --redis-url uses an existing Redis instead (unique prefixes, cleaned up afterwards).
postgres: PostgresStore beside RedisStore, and BullMQ on its PostgreSQL backend raw vs once, on POSTGRES_URL,
else 127.0.0.1:5432 (user postgres, no password), else a throwaway server (initdb, pg_ctl) for the run.
--baseline DIR: DIR (inside bench/) holds redis/, bullmq/ and node_modules/@once/core/ built from an earlier
commit; docs/performance.md has the commands.
peers (--only peers): once beside DBOS, Restate and the Workflow DevKit, tasks of 1–1,000 steps, each a POST held
--effect-ms by a provider; then --kills tasks per side, each SIGKILLed once inside a step. Sides: ${PEER_SIDES.join(", ")}.
Every engine server is started and stopped by the bench; docs/peers.md has the method.
recovery: --kills tasks in process and --kills through a BullMQ worker at the default settings, each SIGKILLed
once inside a step; liveness writes with 50 calls in flight; a 1,000-turn resume; a worker's Redis commands/s.`;

/** Reads the command line. `pnpm bench -- --json x` hands us a literal "--" first: skip it. */
export function parseBenchOptions(argv: readonly string[]): BenchOptions {
  const args = argv[0] === "--" ? argv.slice(1) : argv;
  const { values } = parseArgs({
    args: [...args],
    options: {
      json: { type: "string" },
      only: { type: "string" },
      rounds: { type: "string" },
      "store-rounds": { type: "string" },
      jobs: { type: "string" },
      "memory-records": { type: "string" },
      "effect-ms": { type: "string" },
      "store-round-ms": { type: "string" },
      "redis-url": { type: "string" },
      baseline: { type: "string" },
      sides: { type: "string" },
      "profile-dir": { type: "string" },
      peers: { type: "string" },
      "peer-rounds": { type: "string" },
      kills: { type: "string" },
      quick: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const quick = values.quick === true;
  const sections = values.only === undefined ? [...DEFAULT_SECTIONS] : values.only.split(",").map(section);
  return {
    jsonPath: values.json,
    onlyGiven: values.only !== undefined,
    redisUrl: values["redis-url"],
    redisServerBin: redisServerBin(),
    sections,
    rounds: integer("rounds", values.rounds, quick ? 3 : 5),
    storeRounds: integer("store-rounds", values["store-rounds"], quick ? 4 : 10),
    jobs: integer("jobs", values.jobs, quick ? 2_000 : 10_000),
    effectMs: integer("effect-ms", values["effect-ms"], 5),
    memoryRecords: integer("memory-records", values["memory-records"], quick ? 10_000 : 100_000),
    storeRoundMs: integer("store-round-ms", values["store-round-ms"], quick ? 200 : 300),
    baselineDir: values.baseline,
    profileDir: values["profile-dir"],
    sides: values.sides?.split(",").map((s) => s.trim()),
    peerSides: values.peers === undefined ? [...PEER_SIDES] : values.peers.split(",").map(peerSide),
    peerRounds: integer("peer-rounds", values["peer-rounds"], 1),
    kills: integer("kills", values.kills, quick ? 6 : 50),
    quick,
  };
}

function section(name: string): Section {
  const found = SECTIONS.find((s) => s.toLowerCase() === name.trim().toLowerCase());
  if (!found) throw new Error(`unknown section ${JSON.stringify(name)}\n${USAGE}`);
  return found;
}

function peerSide(name: string): PeerSide {
  const found = PEER_SIDES.find((s) => s === name.trim());
  if (!found) throw new Error(`unknown peers side ${JSON.stringify(name)} (sides: ${PEER_SIDES.join(", ")})`);
  return found;
}

function integer(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0)
    throw new Error(`--${name} must be a positive integer, got ${value}`);
  return n;
}
