import { RecordLayoutError } from "@once/core";
import { RedisScriptError } from "./errors.js";
import { fieldText } from "./record-bytes.js";
import { RECORD_LAYOUT } from "./record-layout.js";

// A record of layout 6 as it is kept: a MessagePack array of the layout, then the fields by position
// (lua/includes/record.lua). The read-task script hands such strings back as they are, with the names the
// positions stand for, so that Redis spends nothing on unpacking a task's records; they are unpacked here.
// Only what Redis' cmsgpack writes for a record is read: an array, integers, doubles, strings, false and nil.

/** The names behind a record's positions and its state and phase codes, as the read-task script sends them. */
export interface RecordNames {
  fields: readonly string[];
  states: readonly string[];
  phases: readonly string[];
}

/**
 * The record `packed` in the get script's terms: `{field, value, …}` in text, the fingerprint and traceparent
 * as their text forms. A record of a newer layout is refused (RecordLayoutError), one that is not a record
 * fails with RedisScriptError.
 */
export function unpackRecord(key: string, packed: Buffer, names: RecordNames): unknown[] {
  const reader = new Reader(packed, key);
  const length = reader.arrayLength();
  const layout = length > 0 ? reader.value() : undefined;
  if (typeof layout !== "number" || !Number.isInteger(layout) || layout < 1)
    throw reader.corrupt("has no layout");
  if (layout > RECORD_LAYOUT) throw new RecordLayoutError(key, layout, RECORD_LAYOUT, "@once/redis");
  const flat: unknown[] = [];
  for (let i = 0; i < length - 1; i++) {
    const value = reader.value();
    if (value === false || value === null) continue;
    const field = names.fields[i];
    if (field === undefined)
      throw reader.corrupt(`has a field at position ${i + 1} of ${names.fields.length}`);
    const code = typeof value === "number" ? value - 1 : -1;
    flat.push(
      field,
      field === "state"
        ? names.states[code]
        : field === "phase"
          ? names.phases[code]
          : fieldText(field, value),
    );
  }
  return flat;
}

class Reader {
  #at = 0;
  readonly #bytes: Buffer;
  readonly #key: string;

  constructor(bytes: Buffer, key: string) {
    this.#bytes = bytes;
    this.#key = key;
  }

  corrupt(what: string): RedisScriptError {
    return new RedisScriptError("read-task", `record ${this.#key} ${what}`);
  }

  arrayLength(): number {
    const tag = this.#byte();
    if (tag >= 0x90 && tag <= 0x9f) return tag & 0x0f;
    if (tag === 0xdc) return this.#uint(2);
    if (tag === 0xdd) return this.#uint(4);
    throw this.corrupt("is not a MessagePack array");
  }

  value(): number | Buffer | boolean | null {
    const tag = this.#byte();
    if (tag <= 0x7f) return tag;
    if (tag >= 0xe0) return tag - 0x100;
    if (tag >= 0xa0 && tag <= 0xbf) return this.#bytesOf(tag & 0x1f);
    switch (tag) {
      case 0xc0:
        return null;
      case 0xc2:
        return false;
      case 0xc3:
        return true;
      case 0xd9:
      case 0xc4:
        return this.#bytesOf(this.#uint(1));
      case 0xda:
      case 0xc5:
        return this.#bytesOf(this.#uint(2));
      case 0xdb:
      case 0xc6:
        return this.#bytesOf(this.#uint(4));
      case 0xcc:
        return this.#uint(1);
      case 0xcd:
        return this.#uint(2);
      case 0xce:
        return this.#uint(4);
      case 0xcf:
        return Number(this.#read(8, (at) => this.#bytes.readBigUInt64BE(at)));
      case 0xd0:
        return this.#read(1, (at) => this.#bytes.readInt8(at));
      case 0xd1:
        return this.#read(2, (at) => this.#bytes.readInt16BE(at));
      case 0xd2:
        return this.#read(4, (at) => this.#bytes.readInt32BE(at));
      case 0xd3:
        return Number(this.#read(8, (at) => this.#bytes.readBigInt64BE(at)));
      case 0xca:
        return this.#read(4, (at) => this.#bytes.readFloatBE(at));
      case 0xcb:
        return this.#read(8, (at) => this.#bytes.readDoubleBE(at));
      default:
        throw this.corrupt(`holds MessagePack type 0x${tag.toString(16)}, which no record field has`);
    }
  }

  #byte(): number {
    return this.#read(1, (at) => this.#bytes[at] as number);
  }

  #uint(size: 1 | 2 | 4): number {
    return this.#read(size, (at) => this.#bytes.readUIntBE(at, size));
  }

  #bytesOf(length: number): Buffer {
    return this.#read(length, (at) => this.#bytes.subarray(at, at + length));
  }

  #read<T>(size: number, read: (at: number) => T): T {
    if (this.#at + size > this.#bytes.length) throw this.corrupt("ends inside a value");
    const value = read(this.#at);
    this.#at += size;
    return value;
  }
}
