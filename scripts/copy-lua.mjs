// Copies the Lua scripts next to the compiled JavaScript: tsc only emits .ts sources.
import { cpSync, existsSync } from "node:fs";

if (existsSync("src/lua")) cpSync("src/lua", "dist/lua", { recursive: true });
