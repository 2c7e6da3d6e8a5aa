// once as a team gets it from the registry: every publishable package packed with `pnpm pack`, the tarballs
// installed with plain npm into a fresh project outside the repository (no workspace links; each peer at the
// lowest version its range allows, where the workspace tests the pinned ones), the README's example
// type-checked with `module: NodeNext` and run against a real Redis, and the installed command run with npx.
// Beside it, a store author's project: only the packed @once/core and vitest, a store of its own (a Map behind
// OnceStore, test/fixtures/outside-store), and @once/core/testing's conformance suite run against it.

import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  cleanupPrefix,
  describeRun,
  NodeChild,
  randomPrefix,
  redisUrl,
  runCommand,
  startRedisServer,
  stopAllRedisServers,
} from "@once/support";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const exampleFile = path.join(repoRoot, "apps/example/src/main.ts");
/** The store an author outside the repository writes, and its tests: copied into a project of its own. */
const outsideStoreDir = path.join(repoRoot, "test/fixtures/outside-store");
const outsideAgent = path.join(repoRoot, "test/fixtures/outside-agent/agent.mjs");

/** What a user brings: a library of once takes these as peers, so the user's own copy is the one it uses. */
const USER_BROUGHT = ["zod", "bullmq", "ioredis", "@opentelemetry/api"];
/** What the README's example installs; the once command is checked on top. */
const EXAMPLE_NEEDS = ["@once/core", "@once/engine", "@once/redis", "@once/bullmq"];

interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  bin?: Record<string, string>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

interface PackedPackage {
  /** The package.json inside the tarball: what npm sees. */
  manifest: Manifest;
  tarball: string;
  files: string[];
}

let project: string;
const packed: PackedPackage[] = [];

function readManifest(file: string): Manifest {
  return JSON.parse(readFileSync(file, "utf8")) as Manifest;
}

function isInside(file: string, dir: string): boolean {
  const relative = path.relative(dir, file);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
}

/** Workspace packages under packages/ and apps/ that are not private. */
function publishablePackages(): { dir: string; manifest: Manifest }[] {
  const found: { dir: string; manifest: Manifest }[] = [];
  for (const group of ["packages", "apps"]) {
    for (const entry of readdirSync(path.join(repoRoot, group), { withFileTypes: true })) {
      const file = path.join(repoRoot, group, entry.name, "package.json");
      if (!entry.isDirectory() || !existsSync(file)) continue;
      const manifest = readManifest(file);
      if (!manifest.private) found.push({ dir: path.dirname(file), manifest });
    }
  }
  return found;
}

/**
 * The environment of a shell outside the repository: no variables pnpm, npm, turbo or vitest set for this
 * run, and none of the repository's bin directories on PATH (so `npx once` can only find the installed one).
 */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (/^(npm_|pnpm_|turbo_|vitest|__vitest|node_options$|node_env$|init_cwd$)/i.test(name)) continue;
    env[name] = value;
  }
  env.PATH = (process.env.PATH ?? "")
    .split(path.delimiter)
    .filter((dir) => dir !== "" && !isInside(path.resolve(dir), repoRoot))
    .join(path.delimiter);
  return { ...env, ...extra };
}

async function run(file: string, args: string[], extraEnv: Record<string, string> = {}) {
  return runIn(project, file, args, extraEnv);
}

async function runIn(cwd: string, file: string, args: string[], extraEnv: Record<string, string> = {}) {
  return runCommand(file, args, { cwd, env: userEnv(extraEnv), timeoutMs: 240_000 });
}

/** A tsconfig as a user's project has it: NodeNext, strict, against the installed type declarations. */
function userTsconfig(compilerOptions: Record<string, unknown>, include: string[]): string {
  const options = {
    target: "ES2023",
    module: "NodeNext",
    moduleResolution: "NodeNext",
    strict: true,
    types: ["node"],
    ...compilerOptions,
  };
  return `${JSON.stringify({ compilerOptions: options, include }, null, 2)}\n`;
}

/** The lowest version a `^x.y.z` range allows; other range shapes are refused, so the floor stays exact. */
function floorOf(name: string, range: string): string {
  const floor = /^\^(\d+\.\d+\.\d+)$/.exec(range)?.[1];
  if (!floor)
    throw new Error(`peer ${name}@${range}: expected a ^x.y.z range starting at the version tested`);
  return floor;
}

/** Every installed copy of a package in a project: `node_modules/<name>` at any depth. */
function installedCopies(name: string, root = project): string[] {
  const copies: string[] = [];
  const visit = (nodeModules: string) => {
    if (!existsSync(nodeModules)) return;
    if (existsSync(path.join(nodeModules, name, "package.json"))) copies.push(path.join(nodeModules, name));
    for (const entry of readdirSync(nodeModules, { withFileTypes: true })) {
      if (!entry.isDirectory() || entry.name.startsWith(".")) continue;
      const packages = entry.name.startsWith("@")
        ? readdirSync(path.join(nodeModules, entry.name)).map((inner) => path.join(entry.name, inner))
        : [entry.name];
      for (const pkg of packages) visit(path.join(nodeModules, pkg, "node_modules"));
    }
  };
  visit(path.join(root, "node_modules"));
  return copies;
}

/** The README's first TypeScript block under "## In code". */
function readmeExample(): string {
  const readme = readFileSync(path.join(repoRoot, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("\n## In code\n"));
  const block = /```ts\n([\s\S]*?)```\n/.exec(section)?.[1];
  if (block === undefined) throw new Error("README.md has no ```ts block under ## In code");
  return block;
}

beforeAll(async () => {
  project = mkdtempSync(path.join(realpathSync(os.tmpdir()), "once-install-"));
  const tarballs = path.join(project, "tarballs");
  mkdirSync(tarballs);
  for (const { dir, manifest } of publishablePackages()) {
    const pack = await runCommand("pnpm", ["pack", "--pack-destination", tarballs], { cwd: dir });
    if (pack.code !== 0) throw new Error(describeRun(pack));
    const tarball = path.join(
      tarballs,
      `${manifest.name.replace(/^@/, "").replace("/", "-")}-${manifest.version}.tgz`,
    );
    const list = await runCommand("tar", ["-tzf", tarball], { cwd: project });
    const inner = await runCommand("tar", ["-xzOf", tarball, "package/package.json"], { cwd: project });
    if (list.code !== 0 || inner.code !== 0) throw new Error(describeRun(list.code !== 0 ? list : inner));
    packed.push({
      tarball,
      files: list.stdout.trim().split("\n"),
      manifest: JSON.parse(inner.stdout) as Manifest,
    });
  }

  const dependencies: Record<string, string> = {};
  for (const { manifest, tarball } of packed)
    dependencies[manifest.name] = `file:${path.relative(project, tarball)}`;
  for (const { manifest } of packed) {
    for (const [name, range] of Object.entries(manifest.peerDependencies ?? {})) {
      const floor = floorOf(name, range);
      if (dependencies[name] !== undefined && dependencies[name] !== floor) {
        throw new Error(
          `peer ${name}: ${manifest.name} asks ${range}, another package a range from ${dependencies[name]}`,
        );
      }
      dependencies[name] = floor;
    }
  }
  const typesNode = readManifest(path.join(repoRoot, "package.json")).devDependencies?.["@types/node"];
  writeFileSync(
    path.join(project, "package.json"),
    `${JSON.stringify(
      {
        name: "once-install-check",
        private: true,
        type: "module",
        dependencies,
        devDependencies: { "@types/node": typesNode },
        // The tarballs stand in for the registry: @once/redis's "@once/core": "^0.1.0" resolves to the
        // packed @once/core, and npm asks the registry for no @once package (it would, and wait on it).
        overrides: Object.fromEntries(packed.map(({ manifest }) => [manifest.name, `$${manifest.name}`])),
      },
      null,
      2,
    )}\n`,
  );
  const install = await run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline"]);
  if (install.code !== 0) throw new Error(describeRun(install));
}, 300_000);

afterAll(async () => {
  await stopAllRedisServers();
  if (project) rmSync(project, { recursive: true, force: true });
});

describe("the packages installed from their tarballs with npm, outside the repository", () => {
  it("packs every publishable package with its dist, README and LICENSE, and no workspace: range left", () => {
    const names = packed.map((p) => p.manifest.name);
    expect(names).toEqual(expect.arrayContaining([...EXAMPLE_NEEDS, "@once/cli"]));
    for (const { manifest, files } of packed) {
      for (const file of ["package.json", "README.md", "LICENSE", "dist/index.js", "dist/index.d.ts"]) {
        expect(files, `${manifest.name} tarball`).toContain(`package/${file}`);
      }
      expect(
        files.filter((file) => /^package\/(src|test)\//.test(file)),
        manifest.name,
      ).toEqual([]);
      expect(JSON.stringify(manifest), manifest.name).not.toContain("workspace:");
      for (const bin of Object.values(manifest.bin ?? {})) {
        expect(files, `${manifest.name} bin`).toContain(`package/${bin.replace(/^\.\//, "")}`);
      }
    }
    expect(isInside(project, repoRoot)).toBe(false);
  });

  it("takes zod, bullmq, ioredis and @opentelemetry/api as peers: one installed copy of each", () => {
    for (const { manifest } of packed.filter((p) => EXAMPLE_NEEDS.includes(p.manifest.name))) {
      expect(
        Object.keys(manifest.dependencies ?? {}).filter((name) => USER_BROUGHT.includes(name)),
        manifest.name,
      ).toEqual([]);
    }
    for (const name of [...USER_BROUGHT, ...packed.map((p) => p.manifest.name)]) {
      expect(installedCopies(name), name).toHaveLength(1);
    }
    // Installed copies, not links back into the workspace.
    for (const { manifest } of packed) {
      expect(
        isInside(realpathSync(path.join(project, "node_modules", manifest.name)), project),
        manifest.name,
      ).toBe(true);
    }
  });

  it("type-checks the README's example with module NodeNext, against the installed type declarations", async () => {
    const example = readFileSync(exampleFile, "utf8");
    expect(readmeExample(), "README.md's example is apps/example/src/main.ts").toBe(example);
    mkdirSync(path.join(project, "src"), { recursive: true });
    writeFileSync(path.join(project, "src/main.ts"), example);
    writeFileSync(
      path.join(project, "tsconfig.json"),
      userTsconfig({ skipLibCheck: false, rootDir: "src", outDir: "dist" }, ["src"]),
    );
    // The workspace's compiler, the project's node_modules: module resolution starts at the project's files.
    const tsc = await run(path.join(repoRoot, "node_modules/.bin/tsc"), ["-p", "."]);
    expect(tsc.code, describeRun(tsc)).toBe(0);
    expect(existsSync(path.join(project, "dist/main.js"))).toBe(true);
  });

  it("runs the example against a real Redis: one charge at the provider, the same result twice", async () => {
    const example = await run(process.execPath, ["dist/main.js"], { REDIS_URL: redisUrl() });
    expect(example.code, describeRun(example)).toBe(0);
    expect(example.stdout).toContain("charges at the provider: 1");
    const ids = [...example.stdout.matchAll(/chargeId: '(ch_[^']+)'/g)].map((m) => m[1]);
    expect(ids).toHaveLength(2);
    expect(ids[0]).toBe(ids[1]);
    expect(example.stdout).toMatch(/replayed: false[\s\S]*replayed: true/);
  });

  it("runs the installed once command with npx once", async () => {
    const redis = await startRedisServer({ appendonly: true, appendfsync: "always" });
    const doctor = await run("npx", ["once", "doctor", "--redis-url", redis.url]);
    expect(doctor.code, describeRun(doctor)).toBe(0);
    expect(doctor.stdout).toContain(`once doctor: ${redis.url} (standalone)`);
    expect(doctor.stdout).toContain("RedisStore.create would start on this Redis");
    expect(isInside(realpathSync(path.join(project, "node_modules/.bin/once")), project)).toBe(true);
  });
});

/** What `vitest run --reporter=json` writes: the parts these tests read. */
interface VitestReport {
  success: boolean;
  numTotalTests: number;
  numPassedTests: number;
  numFailedTests: number;
  testResults: { assertionResults: { title: string; fullName: string; status: string }[] }[];
}

describe("a store written outside the repository, tested with @once/core/testing from the packed tarball", () => {
  let storeProject: string;

  /** Runs one test file of the store's project with the project's own vitest, and reads its JSON report. */
  async function vitestRun(file: string) {
    const report = path.join(storeProject, `${path.basename(file, ".test.ts")}.report.json`);
    const result = await runIn(storeProject, "npx", [
      "vitest",
      "run",
      file,
      "--reporter=default",
      "--reporter=json",
      `--outputFile=${report}`,
    ]);
    if (!existsSync(report)) throw new Error(`vitest wrote no report\n${describeRun(result)}`);
    return { result, report: JSON.parse(readFileSync(report, "utf8")) as VitestReport };
  }

  beforeAll(async () => {
    storeProject = mkdtempSync(path.join(realpathSync(os.tmpdir()), "once-store-kit-"));
    for (const file of readdirSync(outsideStoreDir).filter((name) => name.endsWith(".ts")))
      writeFileSync(path.join(storeProject, file), readFileSync(path.join(outsideStoreDir, file)));
    const core = packed.find((p) => p.manifest.name === "@once/core");
    if (core === undefined) throw new Error("@once/core was not packed");
    const root = readManifest(path.join(repoRoot, "package.json")).devDependencies ?? {};
    const peers = Object.entries(core.manifest.peerDependencies ?? {}).map(([name, range]) => [
      name,
      floorOf(name, range),
    ]);
    writeFileSync(
      path.join(storeProject, "package.json"),
      `${JSON.stringify(
        {
          name: "once-store-kit-check",
          private: true,
          type: "module",
          dependencies: { "@once/core": `file:${core.tarball}`, ...Object.fromEntries(peers) },
          // The workspace's own versions: what the suite is tested with here.
          devDependencies: { vitest: root.vitest, "@types/node": root["@types/node"] },
        },
        null,
        2,
      )}\n`,
    );
    writeFileSync(
      path.join(storeProject, "tsconfig.json"),
      userTsconfig({ noEmit: true, skipLibCheck: false }, ["*.ts"]),
    );
    const install = await runIn(storeProject, "npm", [
      "install",
      "--no-audit",
      "--no-fund",
      "--prefer-offline",
    ]);
    if (install.code !== 0) throw new Error(describeRun(install));
  }, 300_000);

  afterAll(() => {
    if (storeProject) rmSync(storeProject, { recursive: true, force: true });
  });

  it("installs @once/core from its tarball and no other once package; the store imports nothing of once's but core", () => {
    expect(readdirSync(path.join(storeProject, "node_modules/@once"))).toEqual(["core"]);
    expect(isInside(realpathSync(path.join(storeProject, "node_modules/@once/core")), storeProject)).toBe(
      true,
    );
    const store = readFileSync(path.join(storeProject, "map-store.ts"), "utf8");
    expect([...store.matchAll(/from "([^"]+)"/g)].map((m) => m[1]).sort()).toEqual([
      "@once/core",
      "@once/core/store-kit",
    ]);
  });

  it("type-checks the store and its tests with module NodeNext, against the installed declarations", async () => {
    const tsc = await runIn(storeProject, path.join(repoRoot, "node_modules/.bin/tsc"), ["-p", "."]);
    expect(tsc.code, describeRun(tsc)).toBe(0);
  });

  it("passes the conformance suite, run from @once/core/testing with the project's own vitest", async () => {
    const { result, report } = await vitestRun("map-store.test.ts");
    expect(result.code, describeRun(result)).toBe(0);
    expect(report.success).toBe(true);
    expect(report.numFailedTests).toBe(0);
    expect(report.numPassedTests).toBe(report.numTotalTests);
    const names = report.testResults.flatMap((file) => file.assertionResults.map((test) => test.fullName));
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) expect(name).toMatch(/^OnceStore conformance: MapStore /);
  });

  it("fails the same store with one bug: owner writes that compare only the token's fence", async () => {
    const { result, report } = await vitestRun("fence-only-store.test.ts");
    expect(result.code, describeRun(result)).not.toBe(0);
    const failed = report.testResults.flatMap((file) =>
      file.assertionResults.filter((test) => test.status === "failed").map((test) => test.title),
    );
    expect(failed).toContain("compares the whole token: the right fence with another nonce is lost");
  });
});

/** A payments provider that honours no key: it records each charge and, while `hold` is set, never answers. */
function startProvider(): Promise<{
  server: Server;
  url: string;
  charges: { id: string; key: string }[];
  hold: { on: boolean };
}> {
  const charges: { id: string; key: string }[] = [];
  const hold = { on: true };
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://provider");
    if (req.method === "GET") {
      res.end(JSON.stringify(charges.filter((charge) => charge.key === url.searchParams.get("key"))));
      return;
    }
    let body = "";
    req.on("data", (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on("end", () => {
      const charge = { id: `ch_${charges.length + 1}`, key: (JSON.parse(body) as { key: string }).key };
      charges.push(charge);
      // Charged, and the answer held: the caller is killed before it hears of it.
      if (!hold.on) res.end(JSON.stringify({ id: charge.id }));
    });
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, charges, hold }),
    ),
  );
}

describe("an AI SDK agent loop from @once/ai alone, installed from the tarballs: no queue anywhere", () => {
  let agentProject: string;
  const prefix = randomPrefix("outside-agent");

  beforeAll(async () => {
    agentProject = mkdtempSync(path.join(realpathSync(os.tmpdir()), "once-agent-"));
    writeFileSync(path.join(agentProject, "agent.mjs"), readFileSync(outsideAgent));
    const tarballOf = (name: string) => {
      const found = packed.find((p) => p.manifest.name === name);
      if (found === undefined) throw new Error(`${name} was not packed`);
      return `file:${found.tarball}`;
    };
    const ai = packed.find((p) => p.manifest.name === "@once/ai")?.manifest.peerDependencies ?? {};
    const ioredis = packed.find((p) => p.manifest.name === "@once/redis")?.manifest.peerDependencies ?? {};
    writeFileSync(
      path.join(agentProject, "package.json"),
      `${JSON.stringify(
        {
          name: "once-agent-check",
          private: true,
          type: "module",
          // What the user installs: npm i @once/ai @once/redis ai ioredis zod.
          dependencies: {
            "@once/ai": tarballOf("@once/ai"),
            "@once/redis": tarballOf("@once/redis"),
            ai: floorOf("ai", ai.ai ?? ""),
            ioredis: floorOf("ioredis", ioredis.ioredis ?? ""),
            zod: floorOf("zod", ai.zod ?? ""),
          },
          // The tarballs stand in for the registry for the once packages these depend on.
          overrides: Object.fromEntries(
            ["@once/agent", "@once/core", "@once/engine"].map((name) => [name, tarballOf(name)]),
          ),
        },
        null,
        2,
      )}\n`,
    );
    const install = await runIn(agentProject, "npm", [
      "install",
      "--no-audit",
      "--no-fund",
      "--prefer-offline",
    ]);
    if (install.code !== 0) throw new Error(describeRun(install));
  }, 300_000);

  afterAll(async () => {
    const redis = new Redis(redisUrl());
    await cleanupPrefix(redis, prefix);
    redis.disconnect();
    if (agentProject) rmSync(agentProject, { recursive: true, force: true });
  });

  it("has no bullmq, and no @once/bullmq, anywhere in its node_modules", () => {
    const all = readdirSync(path.join(agentProject, "node_modules/@once")).sort();
    expect(all).toEqual(["agent", "ai", "core", "engine", "redis"]);
    for (const name of ["bullmq", "@once/bullmq"])
      expect(installedCopies(name, agentProject), name).toEqual([]);
  });

  it("runs the loop, SIGKILLed while the provider holds the charge, and resumed: one charge, the model not asked again", async () => {
    const provider = await startProvider();
    const env = userEnv({
      PROVIDER_URL: provider.url,
      REDIS_URL: redisUrl(),
      STORE_PREFIX: prefix,
      TASK_ID: "task-7",
    });
    try {
      const first = NodeChild.start({
        script: "agent.mjs",
        cwd: agentProject,
        env,
        name: "agent (first run)",
      });
      await first.waitFor("charging", { timeoutMs: 60_000 });
      // The provider has the charge; the loop has not heard back. Killed as a crash kills it.
      while (provider.charges.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      await first.kill("SIGKILL");
      provider.hold.on = false;

      const resumed = NodeChild.start({
        script: "agent.mjs",
        cwd: agentProject,
        env,
        name: "agent (resumed)",
      });
      const done = await resumed.waitFor("done", { timeoutMs: 60_000 });
      expect(await resumed.exited).toEqual([0, null]);
      // The recorded turn was replayed (the model asked only for the turn after the charge), the charge
      // found out from the provider, never made again.
      expect(resumed.all("reconciled")).toEqual([expect.objectContaining({ found: "ch_1" })]);
      expect(resumed.all("charging")).toEqual([]);
      expect(done).toMatchObject({ text: "Charged.", modelCalls: 1 });
      expect(provider.charges).toHaveLength(1);
    } finally {
      provider.server.closeAllConnections();
      provider.server.close();
    }
  }, 120_000);
});
