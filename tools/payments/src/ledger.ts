import { randomBytes } from "node:crypto";
import type { EffectKind, EffectQuery, EffectRecords, KindLedger, LedgerSnapshot } from "./types.js";
import type { AcceptedInput } from "./validate-input.js";

const ID_PREFIX: { [K in EffectKind]: string } = { charges: "ch", emails: "em", tickets: "tk" };

export type RecordOutcome<K extends EffectKind> =
  | { outcome: "created"; record: EffectRecords[K] }
  | { outcome: "replayed"; record: EffectRecords[K] }
  | { outcome: "key_reused"; error: string };

/**
 * Everything the provider has done, and the idempotency keys it remembers when it honours them.
 *
 * Duplicates are counted per `orderId` for every kind: the demo intends one charge, one email and one
 * ticket per order, and `orderId` is present whether or not `once` wrapped the call — counting per
 * `metadata.once_key` would make an unprotected baseline show zero duplicates.
 */
export class Ledger {
  #records: { [K in EffectKind]: EffectRecords[K][] } = { charges: [], emails: [], tickets: [] };
  // Keyed by `${kind} ${key}`: a key scopes to one endpoint, as at real providers.
  #byIdempotencyKey = new Map<string, { fingerprint: string; record: EffectRecords[EffectKind] }>();

  /** Records the effect now; with a key seen before, returns the first record and records nothing. */
  record<K extends EffectKind>(kind: K, input: AcceptedInput<K>, idempotencyKey?: string): RecordOutcome<K> {
    const fingerprint = JSON.stringify(input);
    const slot = `${kind} ${idempotencyKey}`;
    if (idempotencyKey !== undefined) {
      const seen = this.#byIdempotencyKey.get(slot);
      if (seen !== undefined) {
        // A key reused with another body is a client bug; replaying the old charge would hide it.
        if (seen.fingerprint !== fingerprint) {
          return {
            outcome: "key_reused",
            error: `Idempotency-Key '${idempotencyKey}' was already used with a different body`,
          };
        }
        return { outcome: "replayed", record: seen.record as EffectRecords[K] };
      }
    }
    const record = {
      id: `${ID_PREFIX[kind]}_${randomBytes(12).toString("hex")}`,
      ...input,
      createdAt: new Date().toISOString(),
    } as EffectRecords[K];
    this.#records[kind].push(record);
    if (idempotencyKey !== undefined) this.#byIdempotencyKey.set(slot, { fingerprint, record });
    return { outcome: "created", record };
  }

  /** Records of `kind` matching every field of `query`, oldest first. */
  find<K extends EffectKind>(kind: K, query: EffectQuery): EffectRecords[K][] {
    const wanted = Object.entries(query.metadata ?? {});
    return this.#records[kind].filter(
      (record) =>
        (query.orderId === undefined || record.orderId === query.orderId) &&
        wanted.every(([k, v]) => record.metadata[k] === v),
    );
  }

  snapshot(): LedgerSnapshot {
    return {
      charges: countByOrder(this.#records.charges),
      emails: countByOrder(this.#records.emails),
      tickets: countByOrder(this.#records.tickets),
    };
  }

  reset(): void {
    this.#records = { charges: [], emails: [], tickets: [] };
    this.#byIdempotencyKey.clear();
  }
}

function countByOrder(records: readonly { orderId: string }[]): KindLedger {
  const byOrder: Record<string, number> = {};
  for (const { orderId } of records) byOrder[orderId] = (byOrder[orderId] ?? 0) + 1;
  const duplicates = Object.values(byOrder).reduce((sum, count) => sum + count - 1, 0);
  return { total: records.length, byOrder, duplicates };
}
