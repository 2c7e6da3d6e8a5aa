import { defineConfig } from "vitest/config";

/** The vitest settings every workspace package shares: a JSON report for CI's summary, no silent skips. */
export function packageTestConfig(
  options: { testTimeout?: number; globalSetup?: string[]; include?: string[] } = {},
) {
  return defineConfig({
    test: {
      include: options.include ?? ["test/**/*.test.ts"],
      testTimeout: options.testTimeout ?? 20_000,
      hookTimeout: 60_000,
      globalSetup: options.globalSetup ?? [],
      reporters: ["default", "json"],
      outputFile: { json: "reports/vitest.json" },
      passWithNoTests: false,
    },
  });
}
