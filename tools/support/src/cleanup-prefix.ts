// The client types below are structural, so a `Redis` or `Cluster` from ioredis fits them without this
// package depending on ioredis.

/** What cleanupPrefix needs from a client: ioredis' `Redis` fits. */
export interface ScanDelClient {
  scan(
    cursor: number | string,
    matchToken: "MATCH",
    pattern: string,
    countToken: "COUNT",
    count: number | string,
  ): Promise<[cursor: string, elements: string[]]>;
  del(...keys: string[]): Promise<number>;
}

/** What cleanupPrefix needs from a cluster client: ioredis' `Cluster` fits. */
export interface ClusterScanDelClient {
  readonly isCluster: boolean;
  nodes(role?: "master" | "slave" | "all"): ScanDelClient[];
}

function isClusterClient(client: ScanDelClient | ClusterScanDelClient): client is ClusterScanDelClient {
  return "nodes" in client && typeof client.nodes === "function" && client.isCluster === true;
}

/** Escapes glob metacharacters so SCAN MATCH takes the prefix literally (hash tags contain none). */
function escapeGlob(value: string): string {
  return value.replace(/[*?[\]\\]/g, "\\$&");
}

/**
 * Deletes every key starting with `prefix` (SCAN MATCH prefix*, then DEL), never with KEYS, which blocks a
 * shared Redis. On a cluster client it scans every master and deletes key by key, so keys in different
 * slots never meet in one DEL. Returns the number of keys deleted.
 */
export async function cleanupPrefix(
  client: ScanDelClient | ClusterScanDelClient,
  prefix: string,
): Promise<number> {
  if (prefix === "") throw new Error("cleanupPrefix: refusing an empty prefix (it would delete every key)");
  const pattern = `${escapeGlob(prefix)}*`;
  if (isClusterClient(client)) {
    let deleted = 0;
    for (const node of client.nodes("master")) deleted += await scanAndDelete(node, pattern, true);
    return deleted;
  }
  return scanAndDelete(client, pattern, false);
}

async function scanAndDelete(client: ScanDelClient, pattern: string, oneKeyPerDel: boolean): Promise<number> {
  let cursor = "0";
  let deleted = 0;
  do {
    const [next, keys] = await client.scan(cursor, "MATCH", pattern, "COUNT", 500);
    cursor = next;
    if (keys.length === 0) continue;
    if (oneKeyPerDel) {
      const counts = await Promise.all(keys.map((key) => client.del(key)));
      deleted += counts.reduce((sum, n) => sum + n, 0);
    } else {
      deleted += await client.del(...keys);
    }
  } while (cursor !== "0");
  return deleted;
}
