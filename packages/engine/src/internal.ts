/**
 * What once's own transports (`@once/bullmq`) share with the engine and users do not need:
 * `@once/engine/internal`. No compatibility promise: it changes with the packages that use it, in step.
 */
export {
  ATTR_ONCE_ATTEMPT,
  ATTR_ONCE_ENQUEUES,
  ATTR_ONCE_JOINED,
  ATTR_ONCE_KEY,
  ATTR_ONCE_REPLAYED,
  ATTR_ONCE_STORED_STATE,
  ATTR_ONCE_TIMEOUT_MS,
  ATTR_ONCE_TOOL,
  EVENT_DEDUP_HIT,
  EVENT_IN_FLIGHT,
  EVENT_LEASE_LOST,
  EVENT_TIMEOUT,
} from "./attributes.js";
export { taskCancelled } from "./lease.js";
export type { ToolRegistry } from "./registry.js";
export { callAttributes, contextFromCarrier, currentTraceCarrier, type Telemetry } from "./telemetry.js";
