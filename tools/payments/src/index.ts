export { PaymentsError, type PaymentsErrorCode } from "./errors.js";
export { createLatencySampler, DEFAULT_LATENCY, type LatencyConfig } from "./latency.js";
export { PaymentsClient, type PaymentsRequestOptions } from "./payments-client.js";
export { type PaymentsServer, type PaymentsServerOptions, startPaymentsServer } from "./payments-server.js";
export type {
  Charge,
  ChargeInput,
  EffectKind,
  EffectQuery,
  Email,
  EmailInput,
  KindLedger,
  LedgerSnapshot,
  Ticket,
  TicketInput,
} from "./types.js";
