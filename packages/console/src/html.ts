// HTML built with one tagged template: every interpolated value is escaped as text unless it is itself
// Html (made by `html` or `raw`). A record's result, error, tool name or key can hold anything, `<script>`
// included; it reaches the page only through escapeHtml().

/** Markup that is already safe to put in a page. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

type Part = Html | string | number | boolean | undefined | null | readonly Part[];

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
  "`": "&#96;",
};

/** Text made safe for element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => ESCAPES[c] ?? c);
}

function render(part: Part): string {
  if (part === undefined || part === null || part === false) return "";
  if (part instanceof Html) return part.text;
  if (Array.isArray(part)) return part.map(render).join("");
  return escapeHtml(String(part));
}

/** `html\`<td>${value}</td>\``: the literal parts as written, every value escaped (arrays joined). */
export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0] ?? "";
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? "");
  });
  return new Html(out);
}

/** Markup written by this package itself, never anything read from a record or a request. */
export function raw(text: string): Html {
  return new Html(text);
}
