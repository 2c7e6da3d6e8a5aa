export { callOnceTool } from "./client.js";
export { ONCE_ERROR_META, ONCE_REPLAYED_META, type OnceMcpServerOptions, onceMcpServer } from "./server.js";
export { ONCE_STEP_META, type OnceStep } from "./step.js";
