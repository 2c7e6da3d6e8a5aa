import { fileURLToPath } from "node:url";

export { type OrderWorker, type OrderWorkerOptions, startOrderWorker } from "./order-worker.js";

/** The worker process's entry point, for `spawn(process.execPath, [WORKER_MAIN, …])`. */
export const WORKER_MAIN = fileURLToPath(new URL("./main.js", import.meta.url));
