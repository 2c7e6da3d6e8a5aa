/**
 * What once's own tools (the benchmarks, the tests) need of the wire between dispatcher and worker, and users
 * do not: `@once/bullmq/internal`. No compatibility promise.
 */
export { CALL_VERSION, isCallData, parseCallData } from "./wire.js";
