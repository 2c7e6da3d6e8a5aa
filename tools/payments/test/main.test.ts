import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { PaymentsClient } from "../src/index.js";

const mainJs = fileURLToPath(new URL("../dist/main.js", import.meta.url));

describe("main.js", () => {
  it("prints its URL as one JSON line, serves, and exits 0 on SIGTERM", async () => {
    expect(existsSync(mainJs), "build @once/payments before testing its CLI").toBe(true);
    const child = spawn(
      process.execPath,
      [mainJs, "--port", "0", "--no-latency", "--honour-idempotency-key", "--seed", "7"],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    const exited = once(child, "exit");
    try {
      const [line] = (await once(createInterface({ input: child.stdout }), "line")) as [string];
      const { url } = JSON.parse(line) as { url: string };
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

      const client = new PaymentsClient(url);
      const body = { amount: 500, currency: "eur", orderId: "cli-order" };
      const first = await client.charge(body, { idempotencyKey: "cli-key" });
      const second = await client.charge(body, { idempotencyKey: "cli-key" });
      expect(second.id).toBe(first.id);
      expect((await client.ledger()).charges.total).toBe(1);
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toEqual([0, null]);
  });

  it("refuses a bad option with exit code 2", async () => {
    const child = spawn(process.execPath, [mainJs, "--port", "-5"], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    expect(await once(child, "exit")).toEqual([2, null]);
    expect(stderr).toContain("--port");
  });
});
