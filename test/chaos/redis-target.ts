// Where a chaos process finds Redis, as JSON in its config: one server by URL, a Sentinel-managed primary by
// its Sentinels and name, or a Cluster by its nodes. `natMap` sends a connection to each data node through
// the suite's proxy for that node (tcp-proxy.ts' ProxyGroup), so that the faults can cut it; the Sentinels
// are reached directly.

import { Cluster, Redis, type RedisOptions } from "ioredis";
import { z } from "zod";

const address = z.object({ host: z.string(), port: z.number().int().positive() });
/** `host:port` as Redis names a node → where the client connects instead. */
const natMap = z.record(z.string(), address);

export const redisTarget = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("standalone"), url: z.string() }),
  z.object({ kind: z.literal("sentinel"), name: z.string(), sentinels: z.array(address), natMap }),
  z.object({ kind: z.literal("cluster"), nodes: z.array(address), natMap }),
]);
export type RedisTarget = z.infer<typeof redisTarget>;

/** A client of `target`, with `options` for every connection to a data node. */
export function connectRedis(target: RedisTarget, options: RedisOptions): Redis | Cluster {
  switch (target.kind) {
    case "standalone":
      return new Redis(target.url, options);
    case "sentinel":
      return new Redis({ ...options, sentinels: target.sentinels, name: target.name, natMap: target.natMap });
    case "cluster":
      return new Cluster(target.nodes, { natMap: target.natMap, redisOptions: options });
  }
}
