export { type ClusterScanDelClient, cleanupPrefix, type ScanDelClient } from "./cleanup-prefix.js";
export { MissingRedisServerError } from "./errors.js";
export { freePort, portIsFree } from "./free-port.js";
export {
  type ChildEvent,
  type EventMatch,
  type ExitStatus,
  NodeChild,
  type NodeChildOptions,
} from "./node-child.js";
export { ownedClusterDir } from "./owned-dir.js";
export { pingRedis, waitForRedis } from "./ping-redis.js";
export { pollUntil } from "./poll-until.js";
export { postgresUrl, randomSchema } from "./postgres-address.js";
export { type PostgresServerHandle, postgresBinDir, startPostgresServer } from "./postgres-server.js";
export { clusterQueuePrefix, randomPrefix } from "./random-prefix.js";
export { type RawResponse, rawRequest } from "./raw-request.js";
export { type RawToolAnswer, type RawToolCall, rawToolCall } from "./raw-tool-call.js";
export {
  clusterNodes,
  parseNodeList,
  parseRedisUrl,
  type RedisNodeAddress,
  type RedisUrlParts,
  redisUrl,
} from "./redis-address.js";
export {
  awaitClusterFailover,
  clusterMasters,
  killClusterNode,
  type RedisCluster,
  type RedisClusterOptions,
  restartClusterNode,
  startRedisCluster,
  stopRedisCluster,
} from "./redis-cluster.js";
export { type RedisCommandOptions, redisCommand } from "./redis-command.js";
export {
  type SentinelTopology,
  type SentinelTopologyOptions,
  startSentinelTopology,
} from "./redis-sentinel.js";
export {
  type RedisServerHandle,
  type RedisServerOptions,
  redisServerBin,
  startRedisServer,
  stopAllRedisServers,
} from "./redis-server.js";
export { type CommandOptions, type CommandRun, describeRun, runCommand } from "./run-command.js";
