import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { NodeChild } from "../src/index.js";

const fixture = fileURLToPath(new URL("./fixtures/json-lines.mjs", import.meta.url));
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

afterAll(() => NodeChild.stopAll());

describe("NodeChild", () => {
  it("collects JSON lines as events named by one key, and keeps the rest with stderr", async () => {
    const output: string[] = [];
    const child = await NodeChild.startReady({
      script: fixture,
      ready: "ready",
      onOutput: (line) => output.push(line),
    });
    const tick = await child.waitFor((event) => event.type === "tick" && event.n === 3);
    expect(tick).toEqual({ type: "tick", n: 3 });
    expect(child.all("tick").map((event) => event.n)).toEqual([1, 2, 3]);
    expect(child.events[0]).toEqual({ type: "ready", pid: child.pid });
    expect(output).toEqual(expect.arrayContaining(["not json", "a line of stderr"]));
    expect(child.stderr()).toContain("[stdout] not json");
    expect(await child.stop()).toEqual([0, null]);
    expect(child.all("stopping")).toHaveLength(1);
  });

  it("names events by the key it is given", async () => {
    const child = NodeChild.start({ script: fixture, eventKey: "n" });
    // With `n` as the key, "2" is no event's name: only a predicate finds the second tick.
    await expect(child.waitFor("2", { timeoutMs: 200 })).rejects.toThrow(/no "2" within 200 ms/);
    expect(await child.waitFor((event) => event.n === 2)).toEqual({ type: "tick", n: 2 });
    await child.stop();
  });

  it("removes a waiter once it resolves, times out, or the child exits", async () => {
    const child = NodeChild.start({ script: fixture, args: ["3", "5"] });
    const ticks = [child.waitFor("tick"), child.waitFor("tick")];
    const never = expect(child.waitFor("never", { timeoutMs: 50 })).rejects.toThrow(/no "never"/);
    expect(child.waiting).toBe(3);
    await Promise.all([...ticks, never]);
    expect(child.waiting).toBe(0);
    const late = child.waitFor("never");
    expect(child.waiting).toBe(1);
    await expect(late).rejects.toThrow(/exited before "never"/);
    expect(child.waiting).toBe(0);
    expect(await child.exited).toEqual([3, null]);
    // Every line it printed before its exit is there once `exited` resolves.
    expect(child.events.at(-1)).toEqual({ type: "bye" });
    await expect(child.waitFor("never")).rejects.toThrow(/exited before "never".*\n[\s\S]*"bye"/);
  });

  it("freezes and thaws it, and kills it", async () => {
    const child = await NodeChild.startReady({ script: fixture, ready: "ready" });
    await child.waitFor("tick");
    child.freeze();
    expect(child.frozen).toBe(true);
    // Events already on their way may still arrive; then none while it is stopped.
    await sleep(100);
    const count = child.events.length;
    await sleep(200);
    expect(child.events.length).toBe(count);
    child.thaw();
    expect(child.frozen).toBe(false);
    await child.waitFor((event) => event.type === "tick" && Number(event.n) > count);
    expect(await child.kill()).toEqual([null, "SIGKILL"]);
    expect(child.alive).toBe(false);
    // Nothing to signal once it has exited.
    child.freeze();
    expect(child.frozen).toBe(false);
  });

  it("stops a frozen child: SIGCONT, then SIGTERM", async () => {
    const child = await NodeChild.startReady({ script: fixture, ready: "ready" });
    child.freeze();
    expect(await child.stop()).toEqual([0, null]);
  });

  it("kills a child that does not get ready in time", async () => {
    const started = NodeChild.startReady({ script: fixture, ready: "never", timeoutMs: 200 });
    await expect(started).rejects.toThrow(/no "never" within 200 ms/);
  });
});
