#!/usr/bin/env node
// The counting half of .ci/run: reads the vitest JSON reports it is given (one path a line on stdin), prints
// one line per report, and writes "passed failed problems" to <out>.
//
//   find … | node scripts/ci-summary.mjs <out> <node22-report> <node22-root> <root>...
//
// A problem is a report that cannot be read, a test file that failed without a failed test (a syntax error,
// a failing import), or a workspace package under a <root> whose test script runs vitest but that wrote no
// reports/vitest.json, or, under <node22-root>, no <node22-report> from the Node 22 pass.

import fs from "node:fs";
import path from "node:path";

const [out, node22Report, node22Root, ...roots] = process.argv.slice(2);
if (!out || !node22Report || !node22Root) {
  process.stderr.write("usage: node scripts/ci-summary.mjs <out> <node22-report> <node22-root> <root>...\n");
  process.exit(2);
}

const reports = fs.readFileSync(0, "utf8").split("\n").filter(Boolean).sort();
let passed = 0;
let failed = 0;
let skipped = 0;
let problems = 0;
const failures = [];

for (const file of reports) {
  let json;
  try {
    json = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (error) {
    console.log(`[ci] ${file}: unreadable (${error.message}): counted as a problem`);
    problems++;
    continue;
  }
  const p = Number(json.numPassedTests) || 0;
  const f = Number(json.numFailedTests) || 0;
  const s = (Number(json.numPendingTests) || 0) + (Number(json.numTodoTests) || 0);
  // A test file that fails to load (syntax error, failing import) fails a suite without failing a test.
  const brokenFiles = f === 0 ? Number(json.numFailedTestSuites) || 0 : 0;
  passed += p;
  failed += f;
  skipped += s;
  if (brokenFiles > 0) problems++;
  for (const suite of json.testResults ?? [])
    for (const test of suite.assertionResults ?? [])
      if (test.status === "failed")
        failures.push({
          name: `${path.relative(process.cwd(), suite.name)} > ${test.fullName}`,
          why: test.failureMessages?.[0],
        });
  console.log(
    `[ci] ${file}: ${p} passed, ${f} failed, ${s} skipped/todo` +
      (brokenFiles > 0
        ? `, ${brokenFiles} failed test file(s) without a failed test: counted as a problem`
        : ""),
  );
}

// The failed tests by name, with why, last of the per-report lines: the tail of the log is often all that is
// kept. Why is the message's first line and its last lines without the stack (a child's stdout and stderr
// end there).
const WHY_TAIL_LINES = 30;
for (const { name, why } of failures) {
  const lines = String(why ?? "")
    .split("\n")
    .filter((line) => !/^\s+at /.test(line));
  console.log(`[ci] FAILED ${name}: ${(lines[0] ?? "").slice(0, 300)}`);
  for (const line of lines.slice(Math.max(1, lines.length - WHY_TAIL_LINES)))
    console.log(`[ci]   ${line.slice(0, 300)}`);
}

// Every workspace package whose test script runs vitest must have written a report.
const packageOf = (file) => path.dirname(path.dirname(file));
const haveReport = new Set(reports.filter((file) => path.basename(file) === "vitest.json").map(packageOf));
const haveNode22Report = new Set(
  reports.filter((file) => file.endsWith(path.sep + node22Report)).map(packageOf),
);
const packageDirs = [];
for (const root of roots) {
  if (fs.existsSync(path.join(root, "package.json"))) packageDirs.push(root);
  for (const entry of fs.readdirSync(root, { withFileTypes: true })) {
    const dir = path.join(root, entry.name);
    if (entry.isDirectory() && entry.name !== "node_modules" && fs.existsSync(path.join(dir, "package.json")))
      packageDirs.push(dir);
  }
}
for (const dir of packageDirs) {
  let script = "";
  try {
    script = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).scripts?.test ?? "";
  } catch {}
  if (/\bvitest\b/.test(script) && !haveReport.has(dir)) {
    console.log(`[ci] ${dir}: NO reports/vitest.json (its test script is "${script}"): counted as a problem`);
    problems++;
  }
  if (/\bvitest\b/.test(script) && path.dirname(dir) === node22Root && !haveNode22Report.has(dir)) {
    console.log(`[ci] ${dir}: NO ${node22Report} from the Node 22 pass: counted as a problem`);
    problems++;
  }
}
if (reports.length === 0)
  console.log(`[ci] no reports/vitest.json found under ${roots.join(", ")} (excluding node_modules)`);
if (skipped > 0) console.log(`[ci] ${skipped} test(s) skipped or todo`);
fs.writeFileSync(out, `${passed} ${failed} ${problems}\n`);
