import { type AnyTool, UnknownToolError } from "@once/core";
import { DuplicateToolError } from "./errors.js";

/** Tools by name; refuses two tools with one name, answers unknown names with {@link UnknownToolError}. */
export class ToolRegistry {
  readonly #tools = new Map<string, AnyTool>();

  constructor(tools: readonly AnyTool[]) {
    for (const tool of tools) {
      if (this.#tools.has(tool.name)) throw new DuplicateToolError(tool.name);
      this.#tools.set(tool.name, tool);
    }
  }

  get(name: string): AnyTool {
    const tool = this.#tools.get(name);
    if (!tool) throw new UnknownToolError(name);
    return tool;
  }

  /** The registered tool with `tool`'s name, checked to be that same declaration. */
  resolve(tool: AnyTool): AnyTool {
    const registered = this.get(tool.name);
    if (registered !== tool)
      throw new UnknownToolError(`${tool.name} (a different declaration of that name)`);
    return registered;
  }

  [Symbol.iterator](): IterableIterator<AnyTool> {
    return this.#tools.values();
  }
}
