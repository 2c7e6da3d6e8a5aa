// The chaos suite alone: `vitest run --config chaos/vitest.config.ts` from test/. (`pnpm test` runs the
// same files through test/vitest.config.ts once its include lists chaos/**/*.test.ts.)
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["chaos/**/*.test.ts"],
    globalSetup: ["@once/support/global-setup"],
    testTimeout: 175_000,
    hookTimeout: 60_000,
    reporters: ["default"],
    passWithNoTests: false,
  },
});
