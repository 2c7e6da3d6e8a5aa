// Bad usage: every one exits 2 with a message naming the problem, before anything touches Redis. The
// Redis URL points at a port nothing listens on, so a command that tried to connect would say so instead.

import { NodeChild } from "@once/support";
import { describe, expect, it } from "vitest";
import { BINARY, runOnce } from "./run-once.js";

const KEY = "a".repeat(64);
const NOWHERE = "redis://127.0.0.1:1";

const cases: [string, string[], RegExp, Record<string, string>?][] = [
  ["no command", [], /usage: once <command>/],
  ["an unknown command", ["frobnicate"], /unknown command "frobnicate"/],
  ["an unknown option", ["list", "--colour"], /unknown option --colour/],
  ["another command's option", ["list", "--why", "x"], /--why is not an option of `once list`/],
  ["an option without its value", ["list", "--limit"], /--limit needs a value/],
  ["a value for a flag", ["resolve", KEY, "--yes=1"], /--yes takes no value/],
  [
    "a limit that is not a number",
    ["list", "--limit", "ten"],
    /--limit "ten" must be an integer of at least 1/,
  ],
  ["a limit of zero", ["list", "--limit", "0"], /--limit "0" must be an integer/],
  [
    "an unknown state",
    ["list", "--state", "pending"],
    /--state "pending" is not a state: use claimed, reconciling/,
  ],
  ["a duration without a unit", ["list", "--older-than", "10"], /--older-than "10" is not a duration/],
  ["a duration with a bad unit", ["list", "--older-than", "10y"], /--older-than "10y" is not a duration/],
  ["arguments to list", ["list", "extra"], /`once list` takes no arguments/],
  ["inspect without a key", ["inspect"], /which record\? give its key, or --task/],
  [
    "inspect with a malformed key",
    ["inspect", "abc123"],
    /"abc123" is not a key: expected 64 hex characters/,
  ],
  ["inspect with two keys", ["inspect", KEY, KEY], /expected one key, got 2/],
  [
    "inspect with a key and a task",
    ["inspect", KEY, "--task", "t", "--step", "s"],
    /a key or --task\/--step, not both/,
  ],
  ["a task without a step", ["inspect", "--task", "t"], /--task and --step go together/],
  [
    "a step id with a control character",
    ["inspect", "--task", "t", "--step", "a\u0001b"],
    /invalid stepId: must not contain control characters/,
  ],
  [
    "resolve without a decision",
    ["resolve", KEY, "--why", "w", "--yes"],
    /say what happened: --applied --result/,
  ],
  [
    "resolve with two decisions",
    ["resolve", KEY, "--applied", "--failed", "--why", "w", "--yes"],
    /choose one of --applied, --failed/,
  ],
  [
    "--applied without --result",
    ["resolve", KEY, "--applied", "--why", "w", "--yes"],
    /--applied needs --result/,
  ],
  [
    "a result that is not JSON",
    ["resolve", KEY, "--applied", "--result", "{oops", "--why", "w", "--yes"],
    /--result is not JSON/,
  ],
  ["--failed without --error", ["resolve", KEY, "--failed", "--why", "w", "--yes"], /--failed needs --error/],
  [
    "--result with --not-applied",
    ["resolve", KEY, "--not-applied", "--result", "{}", "--why", "w", "--yes"],
    /--result goes with --applied/,
  ],
  ["resolve without --why", ["resolve", KEY, "--not-applied", "--yes"], /--why is required/],
  [
    "an empty --why",
    ["resolve", KEY, "--not-applied", "--why", " ", "--yes"],
    /--why needs a non-empty value/,
  ],
  [
    "resolve with no terminal and no --yes",
    ["resolve", KEY, "--not-applied", "--why", "w"],
    /stdin is not a terminal: pass --yes/,
  ],
  [
    "both --redis-url and --cluster",
    ["list", "--redis-url", NOWHERE, "--cluster", "127.0.0.1:1"],
    /--redis-url or --cluster, not both/,
  ],
  [
    "a URL that is not one",
    ["list", "--redis-url", "localhost:6379"],
    /must start with redis:\/\/ or rediss:\/\//,
  ],
  [
    "a PostgreSQL URL that is not one, to doctor as to every command",
    ["doctor", "--postgres-url", "mysql://once@db:3306/app"],
    /--postgres-url "mysql:\/\/once@db:3306\/app" must start with postgres:\/\/ or postgresql:\/\//,
  ],
  [
    "a PostgreSQL URL that does not parse",
    ["list", "--postgres-url", "postgres://once@[db/app"],
    /--postgres-url "postgres:\/\/once@\[db\/app" is not a URL: use postgres:\/\/user@host:5432\/database/,
  ],
  ["a cluster node without a port", ["list", "--cluster", "127.0.0.1"], /"127.0.0.1" is not host:port/],
  [
    "both environment variables",
    ["list"],
    /both REDIS_URL and REDIS_CLUSTER_NODES are set/,
    { REDIS_URL: NOWHERE, REDIS_CLUSTER_NODES: "127.0.0.1:1" },
  ],
  ["audit without --tools", ["audit"], /--tools <module> is required/],
  ["audit of a missing file", ["audit", "--tools", "./nope.mjs"], /--tools \.\/nope\.mjs: no such file/],
  [
    "audit of a module without tools",
    ["audit", "--tools", "test/fixtures/no-tools.mjs"],
    /no once tools exported \(exports: answer\)/,
  ],
  [
    "audit with a bad backoff",
    ["audit", "--tools", "test/fixtures/clean-tools.mjs", "--backoff", "linear:1s"],
    /--backoff "linear:1s": use 5s, fixed:5s or exponential:1s/,
  ],
  [
    "audit with zero attempts",
    ["audit", "--tools", "test/fixtures/clean-tools.mjs", "--attempts", "0"],
    /--attempts "0" must be an integer of at least 1/,
  ],
  [
    "audit with a connection option",
    ["audit", "--tools", "x.mjs", "--prefix", "p:"],
    /--prefix is not an option of `once audit`/,
  ],
  [
    "stats with a bad sample",
    ["stats", "--sample", "-3"],
    /--sample needs a value|--sample "-3" must be an integer/,
  ],
  [
    "console --allow-writes without a token",
    ["console", "--allow-writes"],
    /--allow-writes needs a token: set ONCE_CONSOLE_TOKEN or pass --token-file/,
    { ONCE_CONSOLE_TOKEN: "" },
  ],
  [
    "console with a short token",
    ["console", "--allow-writes"],
    /the console's token must be 16 characters or more/,
    { ONCE_CONSOLE_TOKEN: "short" },
  ],
  [
    "console --token-file without --allow-writes",
    ["console", "--token-file", "token.txt"],
    /--token-file goes with --allow-writes/,
  ],
  [
    "console with a bad port",
    ["console", "--port", "http"],
    /--port "http" must be an integer of at least 0/,
  ],
  [
    "console with a Jaeger URL that is not http",
    ["console", "--jaeger-url", "javascript:alert(1)"],
    /--jaeger-url "javascript:alert\(1\)" must be an http:\/\/ or https:\/\/ URL/,
  ],
  [
    "console with a Jaeger URL that does not parse",
    ["console", "--jaeger-url", "http://[::1"],
    /--jaeger-url "http:\/\/\[::1" must be an http:\/\/ or https:\/\/ URL/,
  ],
  [
    "console with an allowed host that is not a host",
    ["console", "--allowed-hosts", "ops.example.com,https://ops.example.com"],
    /--allowed-hosts: "https:\/\/ops\.example\.com" is not a host: give a name or an address/,
  ],
  ["arguments to console", ["console", "extra"], /`once console` takes no arguments/],
  ["help about an unknown command", ["help", "frobnicate"], /unknown command "frobnicate"/],
  [
    "a parse error points at the help of the command given, not at a command word in a value",
    ["list", "--tool", "inspect", "--bogus"],
    /unknown option --bogus\n\(see once list --help\)/,
  ],
];

describe.concurrent("bad usage exits 2 with a message naming the problem", () => {
  it.each(cases)("%s", async (_name, args, message, env) => {
    const run = await runOnce(args, { env: { REDIS_URL: NOWHERE, ...env } });
    expect(run.stderr).toMatch(message);
    expect(run.code).toBe(2);
    expect(run.stderr).not.toMatch(/unexpected error|cannot reach Redis/);
  });
});

describe.concurrent("help", () => {
  it.each(["inspect", "list", "resolve", "audit", "doctor", "stats", "console"])(
    "once %s --help exits 0 with usage and examples",
    async (command) => {
      const run = await runOnce([command, "--help"]);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain(`usage:\n  once ${command}`);
      expect(run.stdout).toContain("examples:");
      expect(run.stdout).toContain("exit codes: 0 ok, 1 found a problem (or refused), 2 bad usage");
    },
  );

  it("once --help lists every command", async () => {
    const run = await runOnce(["--help"]);
    expect(run.code).toBe(0);
    for (const command of ["inspect", "list", "resolve", "audit", "doctor", "stats", "console"]) {
      expect(run.stdout).toMatch(new RegExp(`^  ${command} `, "m"));
    }
  });
});

describe("a Redis that does not answer", () => {
  it("once console still serves, says the store is unreachable, and never shows the URL's password", async () => {
    let listening: (url: string) => void = () => {};
    const announced = new Promise<string>((resolve) => {
      listening = resolve;
    });
    const child = NodeChild.start({
      script: BINARY,
      name: "once console",
      args: ["console", "--port", "0", "--redis-url", "redis://:s3cret-pass@127.0.0.1:1"],
      onOutput: (line) => {
        const found = /^once console on (http:\/\/\S+?)\/ /.exec(line);
        if (found?.[1] !== undefined) listening(found[1]);
      },
    });
    try {
      const url = await announced;
      const response = await fetch(`${url}/records?state=unknown`);
      const page = await response.text();
      expect(response.status).toBe(503);
      expect(page).toContain("The store is unreachable");
      expect(page).toContain("redis://:***@127.0.0.1:1");
      expect(page).not.toContain("s3cret");
    } finally {
      await child.stop();
    }
    expect(child.stderr()).not.toContain("s3cret");
    expect(child.stderr()).toContain("once console: SIGTERM, stopping");
  });

  it("is a problem (exit 1) naming where once tried", async () => {
    const run = await runOnce(["list", "--redis-url", NOWHERE]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/cannot reach Redis at redis:\/\/127\.0\.0\.1:1/);
  });

  it("never prints the password of a URL it refuses", async () => {
    for (const args of [
      ["doctor", "--postgres-url", "mysql://once:s3cret@db/app"],
      ["list", "--postgres-url", "postgres://once:s3cret@[db/app"],
      ["list", "--redis-url", "http://:s3cret@127.0.0.1:1"],
      ["list", "--redis-url", "redis://:s3cret@[127.0.0.1"],
    ]) {
      const run = await runOnce(args);
      expect(run.code, args.join(" ")).toBe(2);
      expect(run.stderr).toContain(":***@");
      expect(run.stderr).not.toContain("s3cret");
    }
  });

  it("never prints the password of the URL", async () => {
    const run = await runOnce(["doctor", "--redis-url", "redis://user:s3cret@127.0.0.1:1"]);
    expect(run.code).toBe(1);
    expect(run.stderr).not.toContain("s3cret");
  });
});
