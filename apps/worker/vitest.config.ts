import { packageTestConfig } from "../../vitest.shared.ts";

// The test starts the worker as a child process and runs calls through it: on a loaded 2-core CI machine
// that alone has taken longer than the default limit.
export default packageTestConfig({ testTimeout: 60_000 });
