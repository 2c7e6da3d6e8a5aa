import { randomFillSync } from "node:crypto";

// Claims are hot: one randomBytes(8) per claim costs a trip into the CSPRNG and a new Buffer each time
// (several µs). Filling a pool once per 512 claims costs the same randomness at a fraction of that.
const pool = Buffer.alloc(4096);
let next = pool.length;

/** 16 random hex characters from the CSPRNG: the owner part of a claim's token (`<fence>.<nonce>`). */
export function ownerNonce(): string {
  if (next + 8 > pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  const nonce = pool.toString("hex", next, next + 8);
  next += 8;
  return nonce;
}
