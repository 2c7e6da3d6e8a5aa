import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The payments stand-in in a process of its own, so that the suite's own work never delays its clock. */
export interface PaymentsProcess {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

/** Starts `apps/payments`' CLI on a free port with a seeded heavy-tailed latency; resolves once it listens. */
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
  const child: ChildProcess = spawn(process.execPath, [main, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  const killAtExit = () => child.kill("SIGKILL");
  process.once("exit", killAtExit);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString("utf8")).slice(-4000);
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timedOut = await Promise.race([
        exited.then(() => false),
        new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 5_000).unref()),
      ]);
      if (timedOut) child.kill("SIGKILL");
    }
    await exited;
    process.off("exit", killAtExit);
  };
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let buffered = "";
      const timer = setTimeout(
        () => reject(new Error(`payments did not start within 30 s: ${stderr}`)),
        30_000,
      );
      child.stdout?.on("data", (chunk: Buffer) => {
        buffered += chunk.toString("utf8");
        const newline = buffered.indexOf("\n");
        if (newline < 0) return;
        clearTimeout(timer);
        resolve((JSON.parse(buffered.slice(0, newline)) as { url: string }).url);
      });
      child.once("exit", () => {
        clearTimeout(timer);
        reject(new Error(`payments exited at start: ${stderr}`));
      });
    });
    return { url, pid: child.pid ?? 0, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
