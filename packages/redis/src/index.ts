export { checkDurability } from "./check-durability.js";
export { checkRedis } from "./check-redis.js";
export { type CheckRedisOptions, diagnoseRedis, type RedisReport } from "./diagnose-redis.js";
export {
  RedisConfigError,
  type RedisErrorCode,
  RedisScriptError,
} from "./errors.js";
export type { RedisNodeReport } from "./inspect-node.js";
export { nodeAddress } from "./node-address.js";
export type { CheckLevel, CheckStatus, RedisCheck } from "./node-checks.js";
export { parseInfo } from "./parse-info.js";
export { RECORD_LAYOUT } from "./record-layout.js";
export {
  databaseSize,
  RedisOperatorStore,
  type RedisOperatorStoreOptions,
} from "./redis-operator-store.js";
export { RedisStore, type RedisStoreOptions } from "./redis-store.js";
export {
  type RecordBatch,
  type ScanRecordsOptions,
  scanRecordBatches,
  scanRecords,
} from "./scan-records.js";
export { type ScriptDigest, scriptDigests } from "./script-digests.js";
export { SCRIPT_VERSION } from "./script-names.js";
