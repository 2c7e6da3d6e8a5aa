export {
  type Authorize,
  type ConsoleAction,
  type ConsoleHandler,
  type ConsoleOptions,
  createConsole,
} from "./create-console.js";
export { toNodeListener } from "./node-listener.js";
