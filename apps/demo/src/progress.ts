import type { ModeEvent } from "./run-mode.js";

/**
 * Shows a mode's progress: one line redrawn in place on a terminal; otherwise a line per quarter of the
 * tasks, so logs (CI, pipes) stay short.
 */
export class Progress {
  readonly #out: NodeJS.WriteStream;
  readonly #tty: boolean;
  #line = "";
  #lastQuarter = -1;

  constructor(out: NodeJS.WriteStream = process.stdout) {
    this.#out = out;
    this.#tty = Boolean(out.isTTY);
  }

  report(event: ModeEvent): void {
    switch (event.type) {
      case "phase":
      case "note":
        this.#print(`[${event.mode}] ${event.text}`, true);
        return;
      case "progress": {
        const finished = event.done + event.failed;
        const width = 30;
        const filled = Math.round((finished / event.total) * width);
        const bar = `${"█".repeat(filled)}${"░".repeat(width - filled)}`;
        const text = `[${event.mode}] ${bar} ${finished}/${event.total} tasks${event.failed ? ` (${event.failed} failed)` : ""}`;
        const quarter = Math.floor((finished / event.total) * 4);
        if (this.#tty) {
          this.#print(text, false);
          return;
        }
        if (quarter !== this.#lastQuarter) {
          this.#lastQuarter = quarter;
          this.#print(text, true);
        }
        return;
      }
    }
  }

  /** Ends the in-place line, if any. */
  done(): void {
    if (this.#tty && this.#line) this.#out.write("\n");
    this.#line = "";
    this.#lastQuarter = -1;
  }

  #print(text: string, permanent: boolean): void {
    if (!this.#tty) {
      this.#out.write(`${text}\n`);
      return;
    }
    if (permanent) {
      // A note goes above the bar, which is then redrawn.
      this.#out.write(`\r\x1b[2K${text}\n`);
      if (this.#line) this.#out.write(this.#line);
      return;
    }
    this.#line = text;
    this.#out.write(`\r\x1b[2K${text}`);
  }
}
