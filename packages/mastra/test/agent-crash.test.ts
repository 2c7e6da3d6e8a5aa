// Mastra's own Agent, in an orchestrator process SIGKILLed at each point where a crash could make a resumed run
// repeat itself, then resumed with the same runId: the shared scenarios of test/support/agent-crash.ts, with
// test/agent-process.ts as the child.

import path from "node:path";
import { fileURLToPath } from "node:url";
import { describeAgentCrashes } from "../../../test/support/agent-crash.js";
import { payments, prefix, store, useAgentWorld } from "./agent-world.js";

useAgentWorld("mastra-crash");

describeAgentCrashes({
  orchestrator: "a Mastra Agent (agent.generate)",
  packageRoot: path.resolve(path.dirname(fileURLToPath(import.meta.url)), ".."),
  world: () => ({ paymentsUrl: payments.url, prefix, store }),
});
