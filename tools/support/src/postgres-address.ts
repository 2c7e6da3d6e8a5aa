import { randomBytes } from "node:crypto";

/** The shared PostgreSQL every suite may use: `POSTGRES_URL`, else the local server's `postgres` database. */
export function postgresUrl(): string {
  return process.env.POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
}

/** A unique schema name for one test, e.g. `once_test_dedup_3f9a0c12`: drop it when the test ends. */
export function randomSchema(label: string): string {
  const clean = label
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, "_")
    .slice(0, 24);
  return `once_test_${clean}_${randomBytes(4).toString("hex")}`;
}
