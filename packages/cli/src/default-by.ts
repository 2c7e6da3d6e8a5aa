import os from "node:os";

/** Who an operator's write is by when `--by` is not given: `$USER@hostname`. */
export function defaultBy(env: NodeJS.ProcessEnv): string {
  let user = env.USER ?? env.LOGNAME ?? env.USERNAME;
  if (user === undefined || user === "") {
    try {
      user = os.userInfo().username;
    } catch {
      user = "unknown";
    }
  }
  return `${user}@${os.hostname()}`;
}
