export {
  type CheckRedisOptions,
  checkRedis,
  type RedisNodeReport,
  type RedisReport,
} from "./check-redis.js";
export { RedisConfigError, RedisScriptError } from "./errors.js";
export { parseInfo } from "./parse-info.js";
export { RedisStore, type RedisStoreOptions } from "./redis-store.js";
export { type ScanRecordsOptions, scanRecords } from "./scan-records.js";
export { type ScriptDigest, scriptDigests } from "./script-digests.js";
export { SCRIPT_VERSION } from "./script-names.js";
