/**
 * What once's own packages share with the console and users do not need: `@once/console/internal`, for
 * `once console`, which checks its options the console's way (one home for each check, its own flags named
 * in the message) before it opens a store. No compatibility promise: it changes with the packages that use
 * it, in step.
 */

export { allowedHostsOf, hostsServedAt } from "./allowed-hosts.js";
export { checkJaegerUrl, checkToken } from "./settings.js";
