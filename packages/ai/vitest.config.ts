import { packageTestConfig } from "../../vitest.shared.ts";

export default packageTestConfig({
  globalSetup: ["../../test/support/global-setup.ts"],
  testTimeout: 30_000,
});
