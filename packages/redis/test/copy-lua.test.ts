// The build step of the Lua scripts (scripts/copy-lua.mjs), run as the build runs it: this package's
// scripts flattened into dist/lua and packed as they are, and every rule of the includes enforced on a tree
// of its own.

import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describeRun, runCommand } from "@once/support";
import { afterAll, describe, expect, it } from "vitest";
import { SCRIPT_NAMES } from "../src/script-names.js";

const packageDir = fileURLToPath(new URL("..", import.meta.url));
const STEP = path.join(packageDir, "../../scripts/copy-lua.mjs");
const INCLUDE = /^--- @include "includes\/([a-z-]+)"$/gm;

const read = (dir: string, file: string) => readFileSync(path.join(dir, file), "utf8");

describe("the Lua build step on this package", () => {
  const src = path.join(packageDir, "src/lua");
  const dist = path.join(packageDir, "dist/lua");

  it("writes each script with its includes in place of the include lines, and nothing else", () => {
    const scripts = readdirSync(src).filter((file) => file.endsWith(".lua"));
    expect(scripts.map((file) => file.replace(/-\d+\.lua$/, "")).sort()).toEqual([...SCRIPT_NAMES].sort());
    expect(readdirSync(dist).sort()).toEqual(scripts.sort());
    const users = new Map<string, string[]>();
    for (const script of scripts) {
      const source = read(src, script);
      const flattened = source.replace(INCLUDE, (_, name: string) => {
        users.set(name, [...(users.get(name) ?? []), script]);
        return read(src, `includes/${name}.lua`).replace(/\n$/, "");
      });
      expect(read(dist, script), script).toBe(flattened);
      expect(flattened).not.toContain("@include");
    }
    // Every include serves two scripts or more, and every file in includes/ is one.
    const includes = readdirSync(path.join(src, "includes")).map((file) => file.replace(/\.lua$/, ""));
    expect([...users.keys()].sort()).toEqual(includes.sort());
    for (const [name, by] of users) expect(by.length, name).toBeGreaterThanOrEqual(2);
  });

  it("is what the package ships: dist/lua's scripts, without the includes", async () => {
    const run = await runCommand("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
      cwd: packageDir,
    });
    expect(run.code, describeRun(run)).toBe(0);
    const [packed] = JSON.parse(run.stdout) as [{ files: { path: string }[] }];
    const lua = packed.files.map((file) => file.path).filter((file) => file.endsWith(".lua"));
    expect(lua.sort()).toEqual(
      readdirSync(dist)
        .map((file) => `dist/lua/${file}`)
        .sort(),
    );
  }, 60_000); // npm starts up slowly on a loaded machine: more than the default limit, seen in CI.
});

describe("the Lua build step's rules", () => {
  const trees: string[] = [];
  afterAll(() => {
    for (const tree of trees) rmSync(tree, { recursive: true, force: true });
  });

  /** A package of its own with these files under src/lua; runs the step there. */
  async function build(files: Record<string, string>) {
    const tree = mkdtempSync(path.join(os.tmpdir(), "once-copy-lua-"));
    trees.push(tree);
    mkdirSync(path.join(tree, "src/lua/includes"), { recursive: true });
    for (const [file, text] of Object.entries(files)) writeFileSync(path.join(tree, "src/lua", file), text);
    const run = await runCommand(process.execPath, [STEP], { cwd: tree });
    return { run, tree };
  }

  const shared = { "includes/clock.lua": "local now = 1\n" };

  it("flattens an include into every script that names it, and removes scripts no longer in the sources", async () => {
    const { run, tree } = await build({
      ...shared,
      "a-1.lua": '-- a\n--- @include "includes/clock"\nreturn now\n',
      "b-1.lua": '--- @include "includes/clock"\nreturn now + 1\n',
    });
    expect(run.code, describeRun(run)).toBe(0);
    expect(read(tree, "dist/lua/a-1.lua")).toBe("-- a\nlocal now = 1\nreturn now\n");
    expect(read(tree, "dist/lua/b-1.lua")).toBe("local now = 1\nreturn now + 1\n");
    expect(readdirSync(path.join(tree, "dist/lua")).sort()).toEqual(["a-1.lua", "b-1.lua"]);

    rmSync(path.join(tree, "src/lua/b-1.lua"));
    writeFileSync(path.join(tree, "src/lua/c-1.lua"), '--- @include "includes/clock"\nreturn 3\n');
    const again = await runCommand(process.execPath, [STEP], { cwd: tree });
    expect(again.code, describeRun(again)).toBe(0);
    expect(readdirSync(path.join(tree, "dist/lua")).sort()).toEqual(["a-1.lua", "c-1.lua"]);
  });

  it.each([
    [
      "an include one script uses",
      { ...shared, "a-1.lua": '--- @include "includes/clock"\n', "b-1.lua": "return 1\n" },
      "src/lua/includes/clock.lua is included by a-1.lua only: an include serves two scripts or more",
    ],
    [
      "an include no script uses",
      { ...shared, "a-1.lua": "return 1\n" },
      "src/lua/includes/clock.lua is included by no script",
    ],
    [
      "an include that is not there",
      { ...shared, "a-1.lua": '--- @include "includes/clock"\n--- @include "includes/owner"\n' },
      'src/lua/a-1.lua:2 includes "includes/owner": there is no src/lua/includes/owner.lua',
    ],
    [
      "a script that includes one twice",
      { ...shared, "a-1.lua": '--- @include "includes/clock"\n--- @include "includes/clock"\n' },
      'src/lua/a-1.lua:2 includes "includes/clock" a second time',
    ],
    [
      "an include that includes another",
      {
        "includes/clock.lua": 'local now = 1\n--- @include "includes/other"\n',
        "includes/other.lua": "local other = 2\n",
        "a-1.lua": '--- @include "includes/clock"\n',
        "b-1.lua": '--- @include "includes/clock"\n',
      },
      "src/lua/includes/clock.lua:2 includes another file: includes do not nest",
    ],
  ])("refuses %s, and builds nothing", async (_, files, message) => {
    const { run, tree } = await build(files);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(message);
    expect(readdirSync(tree)).toEqual(["src"]);
  });
});
