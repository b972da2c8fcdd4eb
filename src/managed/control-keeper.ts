// The daemon's control socket, kept in place. A socket file removed while the daemon runs (a
// cleaner of the temporary directory, where too long a path puts it; a tidy-up of the proxy's
// directory) left a healthy daemon no command could reach: `status` called it stopped or hung,
// `reload`, `pac` and `ui` failed, until it was killed. Its path is looked at every few seconds and
// listened on again when the file is gone, while the daemon's entry is still its own: a daemon
// whose entry was dropped stops (managed/entry-watch.ts), and a file there that is not ours
// (another daemon's, under our ID) is never replaced.
import { lstatSync } from 'node:fs';
import { testHookMs } from '../core/test-hooks.js';
import { startControlServer, type ControlHandlers, type ControlServer } from './control.js';

/** Test hook (core/test-hooks.ts testHookMs): how often the daemon looks at its control socket. */
export const TEST_CONTROL_CHECK_ENV = 'KUBECTL_PROXYOUT_TEST_CONTROL_CHECK_MS';
const CHECK_EVERY_MS = 5_000;

export interface KeptControl {
  /** Stops looking, then closes the server in use (ControlServer.closeWithin). */
  closeWithin(waitMs: number): Promise<void>;
}

export interface KeepOptions {
  /** The daemon still owns its entry and is not stopping. */
  stillOurs(): boolean;
  /** Before listening again (its private directory under $TMPDIR may be gone too). */
  prepare?(): void;
  /** After each try: no error once it listens again. */
  relistened(error?: unknown): void;
}

export function keepControlServer(first: ControlServer, socketPath: string, handlers: ControlHandlers, opts: KeepOptions): KeptControl {
  let server = first;
  let busy = false;
  let closed = false;
  const check = async () => {
    if (busy || closed || exists(socketPath) || !opts.stillOurs()) return;
    busy = true;
    try {
      // Closed first: closing a unix socket server unlinks its path (libuv), the new one's too.
      // Connections still open on it (a live page's feed) run on.
      if (server.listening) server.close();
      opts.prepare?.();
      const next = await startControlServer(socketPath, handlers);
      if (closed) return void next.close();
      server = next;
      opts.relistened();
    } catch (err) {
      opts.relistened(err);
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(() => void check(), testHookMs(TEST_CONTROL_CHECK_ENV) ?? CHECK_EVERY_MS);
  timer.unref();
  return {
    closeWithin(waitMs) {
      closed = true;
      clearInterval(timer);
      return server.closeWithin(waitMs);
    },
  };
}

function exists(file: string): boolean {
  try {
    lstatSync(file);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ENOENT';
  }
}
