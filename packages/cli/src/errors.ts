/**
 * Bad usage: an unknown command or option, a missing or malformed argument. The message names the problem;
 * `once` prints it and exits 2 without touching Redis.
 */
export class UsageError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
  }
}

/**
 * A problem found while running a command (Redis unreachable, a module that does not load): `once` prints
 * the message and exits 1.
 */
export class CommandFailedError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
