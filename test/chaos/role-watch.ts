// Which data node is a master, and since when: the suite asks every node its role every 200 ms for the
// whole run, so that a failover nobody planned (Sentinels or a Cluster deeming a live primary down) shows
// up in the report next to the kills that were planned.

import { redisCommand } from "@once/support";

/** A node's role as the suite saw it change: `master`, `slave`, or `down` (no answer). */
export interface RoleChange {
  at: number;
  port: number;
  role: string;
}

export class RoleWatch {
  readonly changes: RoleChange[] = [];
  readonly #roles = new Map<number, string>();
  readonly #timer: NodeJS.Timeout;
  #busy = false;

  constructor(readonly ports: readonly number[]) {
    this.#timer = setInterval(() => void this.#look(), 200);
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  async #look(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      await Promise.all(
        this.ports.map(async (port) => {
          const info = await redisCommand("127.0.0.1", port, ["INFO", "replication"], {
            timeoutMs: 500,
          }).catch(() => null);
          const role = /^role:(\w+)/m.exec(info ?? "")?.[1] ?? "down";
          if (this.#roles.get(port) === role) return;
          this.#roles.set(port, role);
          this.changes.push({ at: Date.now(), port, role });
        }),
      );
    } finally {
      this.#busy = false;
    }
  }
}
