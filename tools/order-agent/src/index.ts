export { classifyPaymentsError } from "./classify-payments-error.js";
export { type Counters, CountingStore } from "./counting-store.js";
export {
  hookedOrderAgentTools,
  type OrderAgentToolHooks,
  pendingOrder,
} from "./hooked-order-agent-tools.js";
export { type KeyLayout, keyLayout } from "./key-layout.js";
export { MemoryOrderBook } from "./memory-order-book.js";
export { type OrderStoreOptions, openOrderStore } from "./open-order-store.js";
export {
  modelLatencyMs,
  type OrderAgentModel,
  type OrderAgentModelOptions,
  type OrderAgentPrompt,
  orderAgentModel,
  orderAgentTurn,
} from "./order-agent-model.js";
export {
  ONCE_KEY_METADATA,
  type OrderAgentOptions,
  type OrderAgentTools,
  orderAgentTools,
} from "./order-agent-tools.js";
export { ORDER_STATUSES, type Order, type OrderBook, type OrderStatus, orderSchema } from "./order-book.js";
export { ORDER_JOB_RETRY } from "./order-job-retry.js";
export {
  openPostgresOrderStore,
  PostgresCounters,
  type PostgresLayout,
  PostgresOrderBook,
  postgresLayout,
  preparePostgresDeployment,
} from "./postgres-deployment.js";
export { RedisCounters } from "./redis-counters.js";
export { RedisOrderBook, type RedisOrderBookOptions } from "./redis-order-book.js";
export {
  type OtlpProtocol,
  otlpProtocol,
  startTracing,
  type Tracing,
  type TracingOptions,
} from "./start-tracing.js";
