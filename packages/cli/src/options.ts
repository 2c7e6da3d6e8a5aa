/** One option of the command line, defined once so every command that takes it parses it the same way. */
export interface OptionSpec {
  type: "string" | "boolean";
  /** May be given more than once (values may also be comma-separated). */
  multiple?: boolean;
  short?: string;
  /** Placeholder in help, e.g. `<duration>`. */
  value?: string;
  description: string;
}

export const OPTIONS = {
  json: { type: "boolean", description: "print JSON on stdout instead of tables" },
  help: { type: "boolean", short: "h", description: "show help for the command" },
  "redis-url": {
    type: "string",
    value: "<url>",
    description: "a standalone Redis (default: REDIS_URL, else redis://127.0.0.1:6379)",
  },
  cluster: {
    type: "string",
    value: "<host:port,…>",
    description: "seed nodes of a Redis Cluster (default: REDIS_CLUSTER_NODES)",
  },
  prefix: { type: "string", value: "<prefix>", description: 'the store\'s key prefix (default "once:")' },
  "postgres-url": {
    type: "string",
    value: "<url>",
    description: "a PostgresStore's database, postgres://user@host:5432/db (instead of Redis)",
  },
  schema: { type: "string", value: "<schema>", description: 'the PostgresStore\'s schema (default "once")' },
  "table-prefix": {
    type: "string",
    value: "<prefix>",
    description: 'the PostgresStore\'s table prefix (default "")',
  },

  task: {
    type: "string",
    value: "<taskId>",
    description: "the task id, to derive the key (cancel: the task to cancel)",
  },
  step: { type: "string", value: "<stepId>", description: "the step id, to derive the key" },
  namespace: {
    type: "string",
    value: "<namespace>",
    description: 'the key\'s namespace (default "default")',
  },

  state: {
    type: "string",
    multiple: true,
    value: "<state>",
    description:
      "only records in this state (claimed, reconciling, released, done, failed, unknown, awaiting_approval, approved, cancelled)",
  },
  tool: { type: "string", multiple: true, value: "<name>", description: "only records of this tool" },
  "older-than": {
    type: "string",
    value: "<duration>",
    description: "only records whose last transition is older than this (e.g. 10m, 2h)",
  },
  limit: { type: "string", value: "<n>", description: "show at most n records (default 100)" },
  replicas: {
    type: "string",
    value: "<n>",
    description:
      "the store's durability.replicas: judge whether every master can have each write confirmed by n replicas",
  },

  applied: { type: "boolean", description: "the effect happened: store --result and replay it" },
  "not-applied": {
    type: "boolean",
    description: "the effect did not happen: release the key, so the next attempt runs it",
  },
  failed: { type: "boolean", description: "fail the call for good with --error, replayed to every attempt" },
  result: { type: "string", value: "<json>", description: "the effect's result, as JSON (with --applied)" },
  error: { type: "string", value: "<message>", description: "the failure to store (with --failed)" },
  "error-code": {
    type: "string",
    value: "<code>",
    description: "a code stored with the failure (with --failed)",
  },
  why: { type: "string", value: "<text>", description: "why: kept on the record (required)" },
  by: { type: "string", value: "<who>", description: "who decided (default: $USER@hostname)" },
  yes: { type: "boolean", short: "y", description: "do not ask for confirmation" },
  fingerprint: {
    type: "string",
    value: "<hex>",
    description:
      "approve/deny: the call's fingerprint as you saw it (once inspect); refused if the record's differs",
  },
  retention: {
    type: "string",
    value: "<duration>",
    description: "the store's retention (resolve: default derived from the record; audit: default 24h)",
  },

  tools: { type: "string", value: "<module>", description: "a JS module exporting once tools" },
  attempts: { type: "string", value: "<n>", description: "BullMQ attempts of each job (default 1)" },
  backoff: {
    type: "string",
    value: "<backoff>",
    description: "BullMQ backoff: 5s (fixed), fixed:5s or exponential:1s (default none)",
  },
  lease: { type: "string", value: "<duration>", description: "the worker's default lease (default 30s)" },
  "lock-duration": {
    type: "string",
    value: "<duration>",
    description: "BullMQ worker lockDuration (default 30s)",
  },
  "stalled-interval": {
    type: "string",
    value: "<duration>",
    description: "BullMQ worker stalledInterval (default 30s)",
  },
  timeout: { type: "string", value: "<duration>", description: "the dispatcher's timeoutMs (default 30s)" },
  retries: { type: "string", value: "<n>", description: "the dispatcher's re-enqueues (default 2)" },
  "resume-gap": {
    type: "string",
    value: "<duration>",
    description: "how long a crashed orchestrator may take to resume (default 0s)",
  },
  allow: {
    type: "string",
    multiple: true,
    value: "<tool>",
    description: "accept this tool's name-based flag (reviewed: not a side effect)",
  },

  port: {
    type: "string",
    value: "<port>",
    description: "the console's port (default 4100; 0 picks a free one)",
  },
  host: {
    type: "string",
    value: "<address>",
    description: "the address the console listens on (default 127.0.0.1: this machine only)",
  },
  "allowed-hosts": {
    type: "string",
    multiple: true,
    value: "<host,…>",
    description:
      "more hosts the console answers to, e.g. a proxy's ops.example.com (default: only the hosts it listens on)",
  },
  "jaeger-url": {
    type: "string",
    value: "<url>",
    description: "Jaeger's UI, e.g. http://localhost:16686: each record's trace links there (console, task)",
  },
  "allow-writes": {
    type: "boolean",
    description:
      "let the console resolve, approve / deny and cancel tasks (needs a token: ONCE_CONSOLE_TOKEN or --token-file)",
  },
  "token-file": {
    type: "string",
    value: "<path>",
    description: "a file holding the console's token (default: ONCE_CONSOLE_TOKEN)",
  },
  refresh: {
    type: "string",
    value: "<duration>",
    description: "how often the console's pages refresh (default 2s)",
  },

  sample: {
    type: "string",
    value: "<n>",
    description: "stop after reading n keys and say the counts are sampled (default 10000)",
  },
} as const satisfies Record<string, OptionSpec>;

export type OptionName = keyof typeof OPTIONS;

/** Options every command takes. */
export const GLOBAL_OPTIONS: readonly OptionName[] = ["json", "help"];

/** Options of the commands that talk to the store: on Redis, or on PostgreSQL with --postgres-url. */
export const CONNECTION_OPTIONS: readonly OptionName[] = [
  "redis-url",
  "cluster",
  "prefix",
  "postgres-url",
  "schema",
  "table-prefix",
];
