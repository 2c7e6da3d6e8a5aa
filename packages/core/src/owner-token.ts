import { randomFillSync } from "node:crypto";

// Claims are hot: one randomBytes(8) per claim costs a trip into the CSPRNG and a new Buffer each time
// (several µs). Filling a pool once per 512 claims costs the same randomness at a fraction of that.
const pool = Buffer.alloc(4096);
let next = pool.length;

/**
 * 16 random hex characters from the CSPRNG: the owner part of a claim's token (`<fence>.<nonce>`), for a store
 * whose server puts the fence in front (a script or a database function that raises the fence itself).
 */
export function ownerNonce(): string {
  if (next + 8 > pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  const nonce = pool.toString("hex", next, next + 8);
  next += 8;
  return nonce;
}

/**
 * A fresh owner token for a claim that raised the record's fence to `fence`: `<fence>.<nonce>`. Every owner
 * write compares the whole token, so a former owner at the same fence (a forged or stale nonce) is `lost`.
 */
export function ownerToken(fence: number): string {
  return `${fence}.${ownerNonce()}`;
}
