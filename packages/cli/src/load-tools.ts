import { existsSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { AnyTool, ToolKind } from "@once/core";
import { CommandFailedError, UsageError } from "./errors.js";

/** A tool found in a module, with every export name it was found under. */
export interface FoundTool {
  tool: AnyTool;
  exports: string[];
}

export interface LoadedTools {
  /** The module's absolute path. */
  file: string;
  tools: FoundTool[];
}

const KINDS: readonly ToolKind[] = ["read", "write", "effect"];

/**
 * Imports a JS module and collects its once tools: every export that is a tool or an array of tools (and,
 * for a CommonJS module, the values of its `module.exports` object). One tool exported under several names
 * is listed once. A path that does not exist, or a module without tools, is bad usage; a module that
 * throws while loading is a CommandFailedError.
 */
export async function loadTools(modulePath: string, cwd: string): Promise<LoadedTools> {
  const file = path.resolve(cwd, modulePath);
  if (!existsSync(file)) throw new UsageError(`--tools ${modulePath}: no such file (${file})`);
  let namespace: Record<string, unknown>;
  try {
    namespace = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (error) {
    const reason = (error as Error).message;
    const hint = /\.(c|m)?tsx?$/.test(file)
      ? " (Node cannot import TypeScript here: point --tools at the built .js, or run once under a loader: node --import tsx $(which once) …)"
      : "";
    throw new CommandFailedError(`--tools ${modulePath}: the module failed to load: ${reason}${hint}`, {
      cause: error,
    });
  }
  const found = new Map<AnyTool, FoundTool>();
  const add = (value: unknown, name: string) => {
    if (isOnceTool(value)) {
      const entry = found.get(value) ?? { tool: value, exports: [] };
      if (!entry.exports.includes(name)) entry.exports.push(name);
      found.set(value, entry);
    } else if (Array.isArray(value)) {
      value.forEach((item, i) => {
        if (isOnceTool(item)) add(item, `${name}[${i}]`);
      });
    }
  };
  for (const [name, value] of Object.entries(namespace)) {
    add(value, name);
    // CommonJS: module.exports arrives as the default export.
    if (name === "default" && isPlainObject(value)) {
      for (const [inner, innerValue] of Object.entries(value)) add(innerValue, `default.${inner}`);
    }
  }
  if (found.size === 0) {
    const names = Object.keys(namespace);
    throw new UsageError(
      `--tools ${modulePath}: no once tools exported (exports: ${names.length === 0 ? "none" : names.join(", ")}); ` +
        "export each tool from defineTool, or an array of them",
    );
  }
  return { file, tools: [...found.values()] };
}

/**
 * True for a tool made by defineTool (or shaped like one): a name, a kind, zod-like input and output
 * schemas and a run function. Checked by shape, because the module may load its own copy of @once/core.
 */
export function isOnceTool(value: unknown): value is AnyTool {
  if (typeof value !== "object" || value === null) return false;
  const t = value as Record<string, unknown>;
  return (
    typeof t.name === "string" &&
    KINDS.includes(t.kind as ToolKind) &&
    typeof t.run === "function" &&
    hasSafeParse(t.input) &&
    hasSafeParse(t.output)
  );
}

function hasSafeParse(schema: unknown): boolean {
  return (
    typeof schema === "object" &&
    schema !== null &&
    typeof (schema as { safeParse?: unknown }).safeParse === "function"
  );
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && Object.getPrototypeOf(value) === Object.prototype;
}
