// What the console's HTTP test files stand on: a store on the shared Redis under a prefix of their own, a console
// that may write (with a token and a Jaeger link) and one that only reads, both listening on 127.0.0.1 — set up
// before the file's tests and torn down after them. The bindings are live: import them, and call
// `useConsoleWorld` once at the top of the file.

import http from "node:http";
import type { AddressInfo } from "node:net";
import { RedisOperatorStore, RedisStore } from "@once/redis";
import { cleanupPrefix, randomPrefix, redisUrl } from "@once/support";
import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { createConsole, toNodeListener } from "../src/index.js";

/** The Jaeger UI the writable console links traces to. */
export const JAEGER = "http://jaeger.example:16686";

export let store: RedisStore;
/** The console that may write: `allowWrites`, the file's token, the Jaeger link. */
export let origin: string;
/** The console that only reads. */
export let readOnlyOrigin: string;

async function serve(servers: http.Server[], options: Parameters<typeof createConsole>[0]): Promise<string> {
  const server = http.createServer(toNodeListener(createConsole(options)));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export function useConsoleWorld(label: string, token: string): void {
  const prefix = randomPrefix(label);
  const servers: http.Server[] = [];
  let redis: Redis;
  beforeAll(async () => {
    redis = new Redis(redisUrl());
    store = await RedisStore.create({ redis, prefix });
    const operator = new RedisOperatorStore({ redis, prefix });
    origin = await serve(servers, { store: operator, allowWrites: true, token, jaegerUrl: JAEGER });
    readOnlyOrigin = await serve(servers, { store: operator });
  });
  afterAll(async () => {
    for (const server of servers) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    await cleanupPrefix(redis, prefix);
    await redis.quit();
  });
}
