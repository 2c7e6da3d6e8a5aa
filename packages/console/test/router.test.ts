import { describe, expect, it } from "vitest";
import { type Route, routerOf } from "../src/router.js";

const answer = (name: string) => async () => new Response(name);

describe("routerOf", () => {
  const route = routerOf([
    { method: "GET", path: "/", handle: answer("overview") },
    { method: "GET", path: "/records", handle: answer("records") },
    { method: "GET", path: "/records/:key", handle: answer("record") },
    { method: "POST", path: "/records/:key/resolve", handle: answer("resolve") },
  ] as Route<void>[]);

  it("finds the route of a method and path, with its segments decoded", async () => {
    expect(
      await route("GET", "/")
        ?.handle(undefined, {})
        .then((r) => r.text()),
    ).toBe("overview");
    expect(route("GET", "/records/ab%43")?.params).toEqual({ key: "abC" });
    expect(route("POST", "/records/k/resolve")?.params).toEqual({ key: "k" });
  });

  it("has nothing for another method, another length, an empty segment or a broken escape", () => {
    expect(route("POST", "/records")).toBeUndefined();
    expect(route("GET", "/records/k/resolve")).toBeUndefined();
    expect(route("GET", "/records/")).toBeUndefined();
    expect(route("GET", "/records/k/")).toBeUndefined();
    expect(route("GET", "/records/%E0%A4%A")).toBeUndefined();
    expect(route("GET", "/nothing")).toBeUndefined();
  });

  it("refuses a table with two routes for one method and pattern", () => {
    expect(() =>
      routerOf([
        { method: "GET", path: "/records/:key", handle: answer("a") },
        { method: "GET", path: "/records/:id", handle: answer("b") },
      ]),
    ).toThrow("two routes for GET /records/:id");
  });
});
