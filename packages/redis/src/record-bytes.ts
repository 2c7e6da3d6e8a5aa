import { OUTCOME_CODES } from "@once/core/internal";
import type { ScriptName } from "./script-names.js";

// A record keeps a call's fingerprint and its attempt's traceparent as bytes (lua/includes/record.lua): 33 and
// 25 where their text takes 64 and 55. The scripts take them as bytes and give them back as bytes, so the
// conversion costs Redis nothing; it is done here, on the way in and out, and nowhere else. The replies that
// can carry them (claim, claim-filed, get, read-task) are read as bytes and turned into text by the functions
// below; every other reply is text.

const HEX_FINGERPRINT = /^[0-9a-f]{64}$/;
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
// What a script answers for a record of a newer layout: numbers, and a key's text (record-layout.ts).
const NEWER_LAYOUT = 13;
const HEX = 1;
const TEXT = 0;

/** A fingerprint as a record keeps it: a kind byte, then the 32 bytes of a hex fingerprint or any other text. */
export function fingerprintBytes(fingerprint: string): Buffer {
  if (HEX_FINGERPRINT.test(fingerprint)) {
    const bytes = Buffer.allocUnsafe(33);
    bytes[0] = HEX;
    bytes.write(fingerprint, 1, "hex");
    return bytes;
  }
  return Buffer.concat([Buffer.of(TEXT), Buffer.from(fingerprint, "utf8")]);
}

function fingerprintText(bytes: Buffer): string {
  if (bytes.length === 0) return "";
  return bytes[0] === HEX ? bytes.toString("hex", 1) : bytes.toString("utf8", 1);
}

/**
 * A traceparent as a record keeps it: its trace id, span id and flags (25 bytes), or "" for none. A header of
 * another version or form is not kept: it only links a replay's span to the first attempt's.
 */
export function traceBytes(traceparent: string | undefined): Buffer | "" {
  const parts = traceparent === undefined ? null : TRACEPARENT.exec(traceparent);
  if (parts === null) return "";
  return Buffer.from(`${parts[1]}${parts[2]}${parts[3]}`, "hex");
}

function traceText(bytes: Buffer): string {
  return `00-${bytes.toString("hex", 0, 16)}-${bytes.toString("hex", 16, 24)}-${bytes.toString("hex", 24, 25)}`;
}

const text = (value: unknown): unknown => (Buffer.isBuffer(value) ? value.toString("utf8") : value);

/** The reply of a script of BYTES_REPLIES (load-scripts.ts), read as bytes, in text. */
export function replyText(script: ScriptName, reply: unknown): unknown {
  if (!Array.isArray(reply)) return reply;
  if (reply[0] === NEWER_LAYOUT) return reply.map(text);
  switch (script) {
    case "get":
      return [reply[0], recordFieldsText(reply[1])];
    case "read-task": {
      // The entry's fields and the names of a packed record's positions, then a key, a pttl and a record for
      // each filed call: its packed string, left as bytes (packed-record.ts), or a hash's fields.
      const [entry, fields, states, phases, ...filed] = reply as [
        unknown,
        unknown,
        unknown,
        unknown,
        ...unknown[],
      ];
      return [
        ...[entry, fields, states, phases].map((list) => (Array.isArray(list) ? list.map(text) : list)),
        ...filed.map((value, i) =>
          i % 3 !== 2 ? text(value) : Buffer.isBuffer(value) ? value : recordFieldsText(value),
        ),
      ];
    }
    default:
      return claimReplyText(reply);
  }
}

/** A claim script's reply, read as bytes, in text: a replay's traceparent as its header. */
function claimReplyText(reply: unknown[]): unknown {
  const code = reply[0];
  const replay = code === OUTCOME_CODES.replay || code === OUTCOME_CODES.replay_error;
  return reply.map((value, i) =>
    replay && i === 3 && Buffer.isBuffer(value) ? traceText(value) : text(value),
  );
}

/** A record's `{field, value, …}` as the get and read-task scripts give it, read as bytes, in text. */
function recordFieldsText(flat: unknown): unknown {
  if (!Array.isArray(flat)) return flat;
  const out: unknown[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const field = String(text(flat[i]));
    out.push(field, fieldText(field, flat[i + 1]));
  }
  return out;
}

/** One field's value, read as bytes, in text: the fingerprint and the traceparent in their text forms. */
export function fieldText(field: string, value: unknown): unknown {
  if (!Buffer.isBuffer(value)) return value;
  if (field === "fp") return fingerprintText(value);
  if (field === "trace") return traceText(value);
  return value.toString("utf8");
}
