import { fileURLToPath } from "node:url";
import { NodeChild } from "@once/support";

/** The payments stand-in in a process of its own, so that the suite's own work never delays its clock. */
export interface PaymentsProcess {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

/** Starts `tools/payments`' CLI on a free port with a seeded heavy-tailed latency; resolves once it listens. */
export async function startPaymentsProcess(options: {
  seed: number;
  p50Ms: number;
  p99Ms: number;
}): Promise<PaymentsProcess> {
  const main = fileURLToPath(new URL("./main.js", import.meta.resolve("@once/payments")));
  const args = [
    "--port",
    "0",
    "--p50",
    String(options.p50Ms),
    "--p99",
    String(options.p99Ms),
    "--seed",
    String(options.seed),
  ];
  // Its one line is `{"url": …}` once it listens.
  const listening = (line: Record<string, unknown>) => typeof line.url === "string";
  const child = await NodeChild.startReady({
    name: "payments",
    script: main,
    args,
    stopGraceMs: 5_000,
    ready: listening,
  });
  const url = String((await child.waitFor(listening)).url);
  return {
    url,
    pid: child.pid,
    stop: async () => {
      await child.stop();
    },
  };
}
