// What the scripts that drive @once/support share: loading it (built, or a clear error saying how), and
// reporting a failure.

/** A wrong command line: reported with the usage, exit 2. */
export class UsageError extends Error {}

/** @once/support's exports; it must have been built (its dist is what the scripts import). */
export async function loadSupport() {
  try {
    return await import("@once/support");
  } catch (error) {
    throw new Error(
      "cannot load @once/support; install and build it first: " +
        `pnpm install && pnpm turbo run build --filter=@once/support (${error.message})`,
      { cause: error },
    );
  }
}

/** Prints `error` as `<name>: message` (and the usage when it is a UsageError), and sets the exit code. */
export function usageFailure(name, usage, error) {
  if (error instanceof UsageError) {
    process.stderr.write(`${name}: ${error.message}\n${usage}\n`);
    process.exitCode = 2;
    return;
  }
  process.stderr.write(`${name}: ${error.message}\n`);
  process.exitCode = 1;
}
