import { packageTestConfig } from "../../vitest.shared.ts";

// Real child processes and a provider whose effects take 1.5 s: slower than unit tests.
export default packageTestConfig({ testTimeout: 60_000 });
