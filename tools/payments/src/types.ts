/** The three kinds of side effect the provider performs; each is also its URL path (`/charges`, …). */
export type EffectKind = "charges" | "emails" | "tickets";

export const EFFECT_KINDS: readonly EffectKind[] = ["charges", "emails", "tickets"];

export interface Charge {
  id: string;
  /** Positive integer, in cents. */
  amount: number;
  currency: string;
  orderId: string;
  metadata: Record<string, string>;
  createdAt: string;
}

export interface Email {
  id: string;
  to: string;
  subject: string;
  body?: string;
  /** Emails name their order so duplicates can be counted per order, as for charges and tickets. */
  orderId: string;
  metadata: Record<string, string>;
  createdAt: string;
}

export interface Ticket {
  id: string;
  orderId: string;
  subject: string;
  metadata: Record<string, string>;
  createdAt: string;
}

export interface ChargeInput {
  amount: number;
  currency: string;
  orderId: string;
  metadata?: Record<string, string>;
}

export interface EmailInput {
  to: string;
  subject: string;
  body?: string;
  orderId: string;
  metadata?: Record<string, string>;
}

export interface TicketInput {
  orderId: string;
  subject: string;
  metadata?: Record<string, string>;
}

export interface EffectRecords {
  charges: Charge;
  emails: Email;
  tickets: Ticket;
}

/** What a search matches: every given field must be equal (`GET /charges?orderId=…&metadata.once_key=…`). */
export interface EffectQuery {
  orderId?: string;
  metadata?: Record<string, string>;
}

/** Counts for one kind. `duplicates` is the sum over orders of (count − 1): one effect per order is intended. */
export interface KindLedger {
  total: number;
  byOrder: Record<string, number>;
  duplicates: number;
}

/** `GET /ledger`: the counts of every kind of effect recorded since start or the last reset. */
export interface LedgerSnapshot {
  charges: KindLedger;
  emails: KindLedger;
  tickets: KindLedger;
}
