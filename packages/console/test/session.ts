// A browser's cookie jar over plain fetch, just enough for the console's two cookies: its same-origin form
// posts, its CSRF cookie, and logging in with the console's token.

export class Session {
  readonly cookies = new Map<string, string>();
  constructor(
    readonly origin: string,
    readonly headers: Record<string, string> = {},
  ) {}

  async fetch(path: string, init: RequestInit = {}): Promise<Response> {
    const response = await fetch(this.origin + path, {
      ...init,
      redirect: "manual",
      headers: {
        ...this.headers,
        ...(init.headers as Record<string, string>),
        cookie: [...this.cookies].map(([name, value]) => `${name}=${value}`).join("; "),
      },
    });
    for (const cookie of response.headers.getSetCookie()) {
      const [pair] = cookie.split(";");
      const [name, value] = (pair ?? "").split("=");
      if (name !== undefined && value !== undefined) this.cookies.set(name, value);
    }
    return response;
  }

  post(path: string, fields: Record<string, string>): Promise<Response> {
    return this.fetch(path, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: this.origin },
      body: new URLSearchParams(fields).toString(),
    });
  }

  /** The CSRF token the console gave this browser (its cookie, which its own forms carry). */
  get csrf(): string {
    return this.cookies.get("once_console_csrf") ?? "";
  }

  /** Logs in with the console's token through its login form; throws unless the console took it. */
  async logIn(token: string): Promise<void> {
    await this.fetch("/login");
    const answer = await this.post("/login", { csrf: this.csrf, token, next: "/" });
    if (answer.status !== 303) throw new Error(`login answered ${answer.status}`);
  }
}
