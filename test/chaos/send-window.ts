// `pnpm --filter @once/test run send-window [-- --trials N]`: measures DESIGN.md's one window left — an
// owner that stalls past its lease right before its provider request — against a provider that honours
// neither keys nor fences. Each trial stalls a worker just before the request (SIGSTOP with the gate already
// open, or an event loop blocked in CPU-bound code), lets another worker take the key over and charge, then
// resumes the first one. It prints, side by side, how many resumed workers still sent their request when the
// tool's last look before sending is its signal only, and when it is `ctx.assertLease()`.

import { parseArgs } from "node:util";
import type { SendCheck } from "../fixtures/tools.js";
import { FAST_RECOVERY, withScenario } from "../scenarios/scenario.js";

const { values } = parseArgs({
  args: process.argv.slice(2).filter((arg) => arg !== "--"),
  options: { trials: { type: "string", default: "5" } },
});
const trials = Number(values.trials);
if (!Number.isInteger(trials) || trials < 1)
  throw new Error(`--trials must be a positive integer, got ${values.trials}`);

type Stall = "sigstop" | "blocked";

/** One trial: true when the stalled worker's request reached the provider (a second charge). */
async function trial(stall: Stall, sendCheck: SendCheck, n: number): Promise<boolean> {
  return withScenario({ label: `window-${stall}-${sendCheck}-${n}`, worker: FAST_RECOVERY }, async (s) => {
    const gate = s.gateFile("stalled");
    const mode = stall === "sigstop" ? "gate" : "block";
    const stalled = await s.startWorker(
      { api: "with-once", sendCheck, pause: { at: "before-charge", mode, gateFile: gate } },
      "stalled",
    );
    const dispatcher = await s.dispatcher();
    // The prepared tool looks the order up at the provider first, as real tools do: the request then leaves on
    // a connection that is already open, in the fewest event-loop turns.
    const call = dispatcher.call(
      s.tools.chargeCustomerPrepared,
      { orderId: "order_w", amount: 100 },
      { taskId: `task-${n}`, stepId: "charge" },
    );
    await stalled.waitFor("paused");
    if (stall === "sigstop") {
      stalled.freeze();
      s.openGate(gate); // thawed, its next step is the provider request
    }
    await s.startWorker({}, "other");
    await call;
    if (stall === "sigstop") stalled.thaw();
    else s.openGate(gate);
    // The stalled worker ends its attempt either way: it charged and its complete was refused, or it sent nothing.
    await stalled.waitFor("processor-threw");
    return s.charges().total > 1;
  });
}

const rows: string[] = [];
for (const stall of ["sigstop", "blocked"] as const) {
  const sent: Record<SendCheck, number> = { signal: 0, "assert-lease": 0 };
  for (let n = 0; n < trials; n++) {
    // Interleaved, so a slow moment of the machine weighs on both alike.
    for (const check of ["signal", "assert-lease"] as const) if (await trial(stall, check, n)) sent[check]++;
  }
  rows.push(
    `${stall.padEnd(8)} │ ${`${sent.signal} / ${trials}`.padStart(13)} │ ${`${sent["assert-lease"]} / ${trials}`.padStart(18)}`,
  );
}
process.stdout.write(
  "stalled past its lease right before the provider request; resumed workers whose request was sent anyway\n" +
    `stall    │ ${"signal only".padStart(13)} │ ${"ctx.assertLease()".padStart(18)}\n` +
    `${rows.join("\n")}\n`,
);
