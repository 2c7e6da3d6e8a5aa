import { redisCommand } from "./redis-command.js";

/** One `field:value` line of an INFO (or CLUSTER INFO) reply; undefined when it is not there. */
export function infoField(info: string | null, field: string): string | undefined {
  const match = new RegExp(`^${field}:(.*)$`, "m").exec(info ?? "");
  return match?.[1]?.trim();
}

/**
 * True when the Redis on 127.0.0.1:`port` is a replica whose link to its primary is up and that has
 * written its AOF since the sync: until then it refuses SHUTDOWN ("Writing initial AOF, can't exit").
 */
export async function replicaInSync(port: number): Promise<boolean> {
  const info = await redisCommand("127.0.0.1", port, ["INFO"]).catch(() => null);
  return (
    infoField(info, "role") === "slave" &&
    infoField(info, "master_link_status") === "up" &&
    infoField(info, "aof_rewrite_in_progress") !== "1" &&
    infoField(info, "aof_rewrite_scheduled") !== "1"
  );
}
