#!/usr/bin/env node
import { processIo } from "./cli-io.js";
import { runCli } from "./run-cli.js";

// exitCode, not exit(): stdout is flushed first, even when piped.
process.exitCode = await runCli(process.argv.slice(2), processIo());
