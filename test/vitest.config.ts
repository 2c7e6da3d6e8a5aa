import { packageTestConfig } from "../vitest.shared.ts";

export default packageTestConfig({
  globalSetup: ["@once/support/global-setup"],
  include: ["scenarios/**/*.test.ts", "chaos/**/*.test.ts", "install/**/*.test.ts"],
  testTimeout: 60_000,
});
