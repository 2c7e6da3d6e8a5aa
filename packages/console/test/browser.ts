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
  /** A browser profile of its own: its own cookies, so its own login. */
  context(): Promise<BrowserContext>;
  close(): Promise<void>;
}

/** Launches one fresh profile (user data dir) per context; close() ends them all and removes the dirs. */
export function launchBrowser(): Browser {
  const contexts: { context: BrowserContext; dir: string }[] = [];
  return {
    async context() {
      const dir = mkdtempSync(path.join(os.tmpdir(), "once-console-chromium-"));
      const context = await chromium.launchPersistentContext(dir, {
        executablePath: CHROMIUM,
        headless: true,
        args: FLAGS,
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
