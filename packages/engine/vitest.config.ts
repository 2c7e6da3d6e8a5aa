import { packageTestConfig } from "../../vitest.shared.ts";

export default packageTestConfig({
  globalSetup: ["@once/support/global-setup"],
  testTimeout: 30_000,
});
