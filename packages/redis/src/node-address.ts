import type { Redis } from "ioredis";

/** How once's reports name one server: its `host:port`, or its socket path. */
export function nodeAddress(node: Redis): string {
  return node.options.path ?? `${node.options.host ?? "127.0.0.1"}:${node.options.port ?? 6379}`;
}
