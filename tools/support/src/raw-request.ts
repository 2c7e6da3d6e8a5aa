// A request with the headers a test chooses, Host included: fetch always sends the URL's own host, as a
// browser does, so a page on a name rebound to this machine is played with node:http.

import http from "node:http";

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** `method path` to the server at `origin` (http://127.0.0.1:port), sent with exactly these headers. */
export function rawRequest(
  origin: string,
  path: string,
  headers: Record<string, string>,
  options: { method?: string; body?: string } = {},
): Promise<RawResponse> {
  const { hostname, port } = new URL(origin);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { hostname, port, path, method: options.method ?? "GET", headers, setHost: false, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}
