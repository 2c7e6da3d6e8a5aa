import { packageTestConfig } from "../../vitest.shared.ts";

// The end-to-end demo runs both modes with real processes; it must finish within 60 s (asserted).
export default packageTestConfig({ testTimeout: 90_000 });
