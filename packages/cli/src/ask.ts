import { createInterface } from "node:readline/promises";
import type { CliIo } from "./cli-io.js";

/** Asks on the terminal; true only for an explicit "yes" (or "y"). End of input counts as no. */
export async function askYes(io: CliIo, question: string): Promise<boolean> {
  const rl = createInterface({ input: io.stdin, output: io.stderr as NodeJS.WritableStream, terminal: true });
  try {
    const closed = new Promise<string>((resolve) => rl.once("close", () => resolve("")));
    const answer = await Promise.race([rl.question(question), closed]);
    return /^(y|yes)$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}
