import { packageTestConfig } from "../../vitest.shared.ts";

// The end-to-end demo runs both modes with real processes; it must finish within 60 s (asserted). A loaded
// 2-core CI machine, running other packages' tests beside it, has taken longer to get there.
export default packageTestConfig({ testTimeout: 180_000 });
