import { packageTestConfig } from "../../vitest.shared.ts";

export default packageTestConfig({ globalSetup: ["./test/build-lua.ts", "@once/support/global-setup"] });
