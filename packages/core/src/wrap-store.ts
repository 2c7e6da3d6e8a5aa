import type { OnceStore } from "./store.js";

/**
 * `store` with some of its methods replaced — to count, report or slow what it does — and everything else its
 * own, bound to it: the capabilities beyond OnceStore's (liveness entries, tasks, approvals, transactions)
 * among them. A wrapper that lists OnceStore's methods alone hides those, and once then runs without them
 * with nothing said: with no liveness entry, a dead owner's calls wait out their whole lease. An override set
 * to `undefined` hides the store's method of that name (a store as an older one was).
 */
export function wrapStore<S extends OnceStore>(
  store: S,
  overrides: { readonly [K in keyof S]?: S[K] } & { readonly [name: string]: unknown },
): S {
  const overridden = (name: string | symbol) => Object.hasOwn(overrides, name);
  return new Proxy(store, {
    get(target, name) {
      if (overridden(name)) return overrides[name as string];
      const value = Reflect.get(target, name, target) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
    has: (target, name) => (overridden(name) ? overrides[name as string] !== undefined : name in target),
  });
}
