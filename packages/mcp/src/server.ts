import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type Tool as McpTool,
  type ToolAnnotations,
} from "@modelcontextprotocol/sdk/types.js";
import { describeApproval, journal, pendingApprovalOf } from "@once/agent";
import {
  type AnyTool,
  type ApprovalPendingError,
  type CallFailedError,
  DEFAULT_NAMESPACE,
  InvalidToolError,
  OnceError,
  type OnceStore,
  type ReplayedFailureError,
  type ToolKind,
  validateKeyPart,
} from "@once/core";
import { type EffectDispatcher, InProcess } from "@once/engine";
import { z } from "zod";
import { ONCE_STEP_META, type OnceStep, readStep } from "./step.js";

export interface OnceMcpServerOptions {
  /** The server's name and version, as MCP clients are told them. */
  name: string;
  version: string;
  store: OnceStore;
  /** once tools (`defineTool`), each served as the MCP tool of its name. Their inputs are objects. */
  tools: readonly AnyTool[];
  /** The namespace of steps that name none. Default "default". */
  namespace?: string;
  /**
   * Effect calls through this dispatcher to workers, instead of in this process. Read and write calls always
   * run here.
   */
  dispatcher?: EffectDispatcher;
  /** Lease of an effect call's owner, unless the tool sets its own. Default 30 s. */
  leaseMs?: number;
  /** Largest result stored, in bytes of JSON. Default 1 MiB. */
  maxResultBytes?: number;
  /**
   * How long a client that lost its answer (a crash, a cut connection) may take to call the same step again.
   * The store's retention must cover it, with the leases and attempts, or the server refuses to start. Default 0.
   */
  resumeGapMs?: number;
}

/** What a result's `_meta` says about how it came: true when the store answered and nothing ran. */
export const ONCE_REPLAYED_META = "once/replayed";
/** What an error result's `_meta` carries for a once error: its stable code (e.g. `ONCE_CONFLICT`). */
export const ONCE_ERROR_META = "once/error";
/**
 * What a pending result's `_meta` carries for a call that waits for a person's approval: the record's request
 * (`PendingApproval`: key, tool, reason, requestedAt, expiresAt, and the command that approves it).
 */
export const ONCE_APPROVAL_META = "once/approval";

/**
 * The hints each kind gives MCP clients. Only `read` promises to change nothing; only `write` promises a
 * repeat changes nothing more; an effect promises neither, and reaches outside the server.
 */
const ANNOTATIONS: Record<ToolKind, ToolAnnotations> = {
  read: { readOnlyHint: true },
  write: { readOnlyHint: false, idempotentHint: true },
  effect: { readOnlyHint: false, idempotentHint: false, openWorldHint: true },
};

/**
 * An MCP server (the SDK's `Server`) serving once tools: connect it to a transport (`StdioServerTransport`,
 * `StreamableHTTPServerTransport`). MCP has no idempotency of its own, so an effect call names its step in
 * the request's `_meta["once/step"]` and runs once per step — claimed before the effect, its result stored
 * and replayed to every later call of the step, a call cut off by a crash reconciled by the next. An effect
 * call without a valid step is refused, and nothing runs. Read and write calls need no step; one that names a
 * step has its result stored under it too, so a resumed agent calling that step again sees the same answer.
 */
export function onceMcpServer(options: OnceMcpServerOptions): Server {
  const byName = new Map<string, AnyTool>();
  const listed: McpTool[] = [];
  for (const declared of options.tools) {
    listed.push(listing(declared));
    byName.set(declared.name, declared);
  }
  // Set on every step here, so a step that names no namespace has the same key through a dispatcher.
  const namespace = validateKeyPart("namespace", options.namespace ?? DEFAULT_NAMESPACE);
  const settings = {
    store: options.store,
    namespace,
    ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
    ...(options.maxResultBytes === undefined ? {} : { maxResultBytes: options.maxResultBytes }),
    ...(options.resumeGapMs === undefined ? {} : { resumeGapMs: options.resumeGapMs }),
  };
  const unstepped = new InProcess({ ...settings, tools: options.tools.filter((t) => t.kind !== "effect") });
  const stepped = new Map(options.tools.map((declared) => [declared.name, journal(declared)]));
  const steps = new InProcess({ ...settings, tools: [...stepped.values()] });
  const { dispatcher } = options;

  async function run(declared: AnyTool, input: unknown, step: OnceStep | undefined, signal: AbortSignal) {
    if (step === undefined) return unstepped.call(declared, input as never, { signal });
    if (declared.kind === "effect") {
      if (dispatcher) return dispatcher.call(declared, input as never, step);
      // Not the request's signal: a client that hangs up mid-charge should find the charge stored when it
      // calls again, not an effect cut off halfway for the next call to reconcile.
      return steps.call(declared, input as never, step);
    }
    return steps.call(stepped.get(declared.name) as AnyTool, input as never, { ...step, signal });
  }

  const server = new Server(
    { name: options.name, version: options.version },
    { capabilities: { tools: {} } },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listed }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name, arguments: input = {}, _meta } = request.params;
    const declared = byName.get(name);
    // Not a tool error: the spec makes an unknown tool the protocol's to answer.
    if (!declared)
      throw new McpError(ErrorCode.InvalidParams, `unknown tool ${JSON.stringify(name)}: see tools/list`);
    const named = readStep(_meta);
    if (named !== undefined && "refused" in named) return refused(`${name}: ${named.refused}; nothing ran`);
    if (named === undefined && declared.kind === "effect")
      return refused(
        `${name} is an effect tool: name the call's step in _meta[${JSON.stringify(ONCE_STEP_META)}] ` +
          "({ taskId, stepId, namespace? }, the same on every retry of this call) so it runs once; nothing ran",
      );
    const step = named && { ...named, namespace: named.namespace ?? namespace };
    try {
      const done = await run(declared, input, step, extra.signal);
      const text = JSON.stringify(done.result ?? null);
      return {
        content: [{ type: "text", text }],
        ...(isObject(done.result) ? { structuredContent: done.result } : {}),
        _meta: { [ONCE_REPLAYED_META]: done.replayed },
      };
    } catch (error) {
      return failed(declared, error);
    }
  });
  return server;
}

/** A tool as tools/list shows it: JSON Schema from its zod schemas, annotations from its kind. */
function listing(declared: AnyTool): McpTool {
  const inputSchema = jsonSchemaOf(declared, "input");
  if (inputSchema?.type !== "object")
    throw new InvalidToolError(
      declared.name,
      "an MCP tool takes an object: declare its input as z.object(…)",
    );
  // An output that is not an object has no schema MCP can carry; its result is text only.
  const outputSchema = jsonSchemaOf(declared, "output");
  return {
    name: declared.name,
    ...(declared.description === undefined ? {} : { description: declared.description }),
    inputSchema: inputSchema as McpTool["inputSchema"],
    ...(outputSchema?.type === "object" ? { outputSchema: outputSchema as McpTool["outputSchema"] } : {}),
    annotations: ANNOTATIONS[declared.kind],
  };
}

/**
 * The JSON Schema of a tool's input (what a caller may send) or output (what it returns). Draft 7, as the
 * SDK's own server converts zod and its client validates; `undefined` for an output zod cannot express.
 */
function jsonSchemaOf(declared: AnyTool, io: "input" | "output"): Record<string, unknown> | undefined {
  try {
    return z.toJSONSchema(declared[io], { target: "draft-7", io }) as Record<string, unknown>;
  } catch (error) {
    if (io === "output") return undefined;
    throw new InvalidToolError(
      declared.name,
      `its input schema has no JSON Schema: ${(error as Error).message}`,
    );
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function refused(text: string, code?: string): CallToolResult {
  return {
    isError: true,
    content: [{ type: "text", text }],
    ...(code === undefined ? {} : { _meta: { [ONCE_ERROR_META]: code } }),
  };
}

/**
 * A failed call as a tool error, the reason in words. A stored failure reads the same the first time and on
 * every replay: an agent's next prompt, which holds it, must not change when the call is answered again.
 */
function failed(declared: AnyTool, error: unknown): CallToolResult {
  // Nothing ran, and nothing will until a person approves the record: the same call then runs once.
  if (OnceError.is(error, "ONCE_APPROVAL_PENDING")) {
    const pending = pendingApprovalOf(error as ApprovalPendingError);
    return {
      isError: true,
      content: [{ type: "text", text: describeApproval(pending) }],
      _meta: { [ONCE_ERROR_META]: "ONCE_APPROVAL_PENDING", [ONCE_APPROVAL_META]: { ...pending } },
    };
  }
  if (OnceError.is(error, "ONCE_CALL_FAILED") || OnceError.is(error, "ONCE_REPLAYED_FAILURE")) {
    const { stored } = error as CallFailedError | ReplayedFailureError;
    return refused(`${declared.name} failed: ${stored.name}: ${stored.message}`, "ONCE_CALL_FAILED");
  }
  if (OnceError.is(error)) return refused(error.message, error.code);
  // The tool's own error, from a read or write (an effect's is stored, above).
  return refused(`${declared.name} failed: ${error instanceof Error ? error.message : String(error)}`);
}
