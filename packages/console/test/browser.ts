// Debian's Chromium (apt-get install chromium), driven by playwright-core: no browser download. The flags keep
// it from reaching for the network, which this machine does not have (it would refuse its connections).

import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { type BrowserContext, chromium } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";

const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export interface Browser {
  /**
   * A browser profile of its own: its own cookies, so its own login. `resolve` maps names to addresses in
   * that browser alone (Chromium's host resolver rules), the way DNS would: `{ "evil.example": "127.0.0.1" }`.
   */
  context(options?: { resolve?: Record<string, string> }): Promise<BrowserContext>;
  close(): Promise<void>;
}

/** Launches one fresh profile (user data dir) per context; close() ends them all and removes the dirs. */
export function launchBrowser(): Browser {
  const contexts: { context: BrowserContext; dir: string }[] = [];
  return {
    async context(options = {}) {
      const rules = Object.entries(options.resolve ?? {}).map(([name, address]) => `MAP ${name} ${address}`);
      const dir = mkdtempSync(path.join(os.tmpdir(), "once-console-chromium-"));
      const context = await chromium.launchPersistentContext(dir, {
        executablePath: CHROMIUM,
        headless: true,
        args: rules.length === 0 ? FLAGS : [...FLAGS, `--host-resolver-rules=${rules.join(", ")}`],
        viewport: { width: 1280, height: 800 },
      });
      contexts.push({ context, dir });
      return context;
    },
    async close() {
      for (const { context, dir } of contexts.splice(0)) {
        await context.close().catch(() => {});
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
