// Copies a package's browser assets (the console's script and stylesheet) next to the compiled JavaScript:
// tsc only emits .ts sources.
import { cpSync, existsSync } from "node:fs";

if (existsSync("src/assets")) cpSync("src/assets", "dist/assets", { recursive: true });
