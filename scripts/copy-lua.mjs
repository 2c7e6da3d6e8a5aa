// Builds a package's Lua scripts next to its compiled JavaScript (tsc only emits .ts sources): each
// src/lua/<name>-<numberOfKeys>.lua is written to dist/lua with its includes flattened, so a file there is
// exactly the text Redis runs, and its SHA1 is the digest EVALSHA and SCRIPT EXISTS speak of.
//
// An include is a line of its own, `--- @include "includes/<name>"`, replaced by src/lua/includes/<name>.lua
// (the idea is BullMQ's). The rules keep a flattened script as readable as its source: an include holds no
// include of its own, a script includes each one once, and an include serves at least two scripts (code that
// one script uses belongs in that script). Run from the package's directory; any broken rule fails the build.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

const SOURCE = "src/lua";
const TARGET = "dist/lua";
const INCLUDE = /^--- @include "([^"]+)"\s*$/;

if (existsSync(SOURCE)) buildScripts();

function buildScripts() {
  const scripts = readdirSync(SOURCE).filter((file) => file.endsWith(".lua"));
  const users = new Map(includeFiles().map((name) => [name, []]));
  const built = new Map();
  for (const script of scripts) built.set(script, flatten(script, users));
  for (const [name, by] of users) {
    if (by.length < 2) {
      fail(
        `${SOURCE}/${name}.lua is included by ${by.length === 0 ? "no script" : `${by[0]} only`}: an include serves two scripts or more; put it in the script that uses it`,
      );
    }
  }
  mkdirSync(TARGET, { recursive: true });
  for (const [script, text] of built) writeIfChanged(path.join(TARGET, script), text);
  // A script renamed or removed in the sources must not linger in the build, where the loader would find it;
  // nor the includes an earlier build copied (another build's temporary files are its own).
  for (const file of readdirSync(TARGET)) {
    if (!built.has(file) && !file.endsWith(".tmp")) rmSync(path.join(TARGET, file), { recursive: true });
  }
}

/** Every include, by the name scripts give it (`includes/<name>`). */
function includeFiles() {
  const dir = path.join(SOURCE, "includes");
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((file) => file.endsWith(".lua"))
    .map((file) => `includes/${file.slice(0, -".lua".length)}`);
}

/** A script's text with each include line replaced by the include's text; notes which script used which. */
function flatten(script, users) {
  const lines = readFileSync(path.join(SOURCE, script), "utf8").split("\n");
  const seen = new Set();
  return lines
    .map((line, index) => {
      const match = INCLUDE.exec(line);
      if (match === null) return line;
      const name = match[1];
      const where = `${SOURCE}/${script}:${index + 1}`;
      const by = users.get(name);
      if (by === undefined) fail(`${where} includes "${name}": there is no ${SOURCE}/${name}.lua`);
      if (seen.has(name)) fail(`${where} includes "${name}" a second time`);
      seen.add(name);
      by.push(script);
      const text = readFileSync(path.join(SOURCE, `${name}.lua`), "utf8").replace(/\n$/, "");
      const nested = text.split("\n").findIndex((included) => INCLUDE.test(included));
      if (nested >= 0)
        fail(`${SOURCE}/${name}.lua:${nested + 1} includes another file: includes do not nest`);
      return text;
    })
    .join("\n");
}

/**
 * Writes through a temporary file and a rename, and only when the text changed: a process loading the scripts
 * meanwhile (another package's tests run against this build) reads the old file or the new one, never half.
 */
function writeIfChanged(file, text) {
  if (existsSync(file) && readFileSync(file, "utf8") === text) return;
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, text);
  renameSync(temporary, file);
}

function fail(message) {
  console.error(`copy-lua: ${message}`);
  process.exit(1);
}
