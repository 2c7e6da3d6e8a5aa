/** What `once` exits with. Scripts and CI can rely on these; see README.md. */
export const ExitCode = {
  /** Done; nothing wrong found. */
  ok: 0,
  /**
   * Found a problem or refused: a Redis setting that can cause duplicates (doctor), a flagged tool or a
   * short retry window (audit), a record that cannot be resolved or does not exist, Redis unreachable.
   */
  problem: 1,
  /** Bad usage: an unknown command or option, a missing or malformed argument. Nothing was touched. */
  usage: 2,
} as const;

export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];
