// A user with no passwd entry: a container's arbitrary UID (OpenShift runs pods so).
import os from 'node:os';

/**
 * oclif asks os.userInfo() for the shell whenever $SHELL is unset (Config.load, which also runs
 * inside run()), and for a user with no passwd entry it throws: every command died with
 * "uv_os_get_passwd returned ENOENT". This process's userInfo then answers from what is known
 * (uid, gid, $HOME, no shell) instead; nothing is set in the environment children inherit.
 */
export function answerUserInfoWithoutPasswd(): void {
  const real = os.userInfo;
  try {
    real();
    return;
  } catch {
    /* no passwd entry */
  }
  const fallback = () => {
    const uid = process.getuid?.() ?? -1;
    return { uid, gid: process.getgid?.() ?? -1, username: process.env.USER || process.env.LOGNAME || String(uid), homedir: os.homedir(), shell: null };
  };
  Object.defineProperty(os, 'userInfo', {
    value: (options?: { encoding: BufferEncoding }) => {
      try {
        return real(options);
      } catch {
        return fallback();
      }
    },
    writable: true,
    configurable: true,
  });
}
