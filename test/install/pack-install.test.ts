// once as a team gets it from the registry: every publishable package packed with `pnpm pack`, the tarballs
// installed with plain npm into a fresh project outside the repository (no workspace links; each peer at the
// lowest version its range allows, where the workspace tests the pinned ones), the README's example
// type-checked with `module: NodeNext` and run against a real Redis, and the installed command run with npx.

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
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describeRun, redisUrl, runCommand, startRedisServer, stopAllRedisServers } from "@once/support";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const exampleFile = path.join(repoRoot, "apps/example/src/main.ts");

/** What a user brings: a library of once takes these as peers, so the user's own copy is the one it uses. */
const USER_BROUGHT = ["zod", "bullmq", "ioredis", "@opentelemetry/api"];
/** What the README's example installs; the once command is checked on top. */
const EXAMPLE_NEEDS = ["@once/core", "@once/redis", "@once/bullmq"];

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
  return runCommand(file, args, { cwd: project, env: userEnv(extraEnv), timeoutMs: 240_000 });
}

/** The lowest version a `^x.y.z` range allows; other range shapes are refused, so the floor stays exact. */
function floorOf(name: string, range: string): string {
  const floor = /^\^(\d+\.\d+\.\d+)$/.exec(range)?.[1];
  if (!floor)
    throw new Error(`peer ${name}@${range}: expected a ^x.y.z range starting at the version tested`);
  return floor;
}

/** Every installed copy of a package in the project: `node_modules/<name>` at any depth. */
function installedCopies(name: string): string[] {
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
  visit(path.join(project, "node_modules"));
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
      `${JSON.stringify(
        {
          compilerOptions: {
            target: "ES2023",
            module: "NodeNext",
            moduleResolution: "NodeNext",
            strict: true,
            skipLibCheck: false,
            types: ["node"],
            rootDir: "src",
            outDir: "dist",
          },
          include: ["src"],
        },
        null,
        2,
      )}\n`,
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
