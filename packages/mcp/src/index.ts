export { callOnceTool } from "./client.js";
export {
  isLoopbackHost,
  McpHttpGuard,
  type McpHttpGuardOptions,
  type McpHttpRefusal,
  type McpHttpRequest,
} from "./http-guard.js";
export {
  ONCE_APPROVAL_META,
  ONCE_ERROR_META,
  ONCE_REPLAYED_META,
  type OnceMcpServerOptions,
  onceMcpServer,
} from "./server.js";
export { ONCE_STEP_META, type OnceStep } from "./step.js";
