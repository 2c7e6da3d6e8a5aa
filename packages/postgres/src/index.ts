export {
  checkPostgres,
  diagnosePostgres,
  MINIMUM_POSTGRES_MAJOR,
  type PostgresCheck,
  type PostgresCheckLevel,
  type PostgresCheckStatus,
  type PostgresReport,
} from "./check-postgres.js";
export {
  PostgresConfigError,
  type PostgresErrorCode,
  PostgresQueryError,
  PostgresSchemaError,
  PostgresVersionError,
} from "./errors.js";
export type { MigrationResult } from "./migrate.js";
export { SCHEMA_VERSION } from "./migrations.js";
export {
  PostgresOperatorStore,
  type PostgresOperatorStoreOptions,
} from "./postgres-operator-store.js";
export { PostgresStore, type PostgresStoreOptions, type SweepResult } from "./postgres-store.js";
export { RECORD_LAYOUT } from "./record-layout.js";
export {
  type TransactionalToolSpec,
  type TransactionContext,
  transactionalTool,
} from "./transactional-tool.js";
