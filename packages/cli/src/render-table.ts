export interface TableOptions {
  /** Columns to right-align (numbers). */
  right?: readonly number[];
  /** Cells longer than this are cut with `…`. Default 60. */
  maxCellWidth?: number;
}

/** A plain-text table: upper-case headers, columns padded with two spaces, no trailing blanks. */
export function renderTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  options: TableOptions = {},
): string {
  const max = options.maxCellWidth ?? 60;
  const right = new Set(options.right ?? []);
  const cells = [headers.map((h) => h.toUpperCase()), ...rows.map((row) => row.map((c) => truncate(c, max)))];
  const widths = headers.map((_, col) => Math.max(...cells.map((row) => [...(row[col] ?? "")].length)));
  return cells
    .map((row) =>
      row
        .map((cell, col) => {
          const pad = " ".repeat((widths[col] ?? 0) - [...cell].length);
          return right.has(col) ? pad + cell : cell + pad;
        })
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/** `text` cut to `max` characters, ending in `…` when cut; newlines shown as `⏎`. */
export function truncate(text: string, max: number): string {
  const flat = text.replace(/\r?\n/g, "⏎");
  const chars = [...flat];
  return chars.length <= max ? flat : `${chars.slice(0, Math.max(1, max - 1)).join("")}…`;
}
