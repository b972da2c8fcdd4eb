// A listen host of `localhost` binds both loopback addresses, as kubectl port-forward does: clients
// resolve the name to either (Node ≥ 17 and psql try ::1 first, Java prefers 127.0.0.1), in the
// order this machine's resolver gives, which Node's own listen(host) would otherwise follow.
import net from 'node:net';
import type { Logger } from '../core/log.js';
import type { Listener } from './listener.js';

/**
 * `start` on 127.0.0.1 and on ::1, one port for both (port 0: the one 127.0.0.1 got); any other
 * host once. ::1 is skipped on a machine without IPv6; taken there, the start fails, since a
 * client trying ::1 would reach whatever holds it.
 */
export async function startOnLoopbacks<L extends Listener>(
  host: string,
  port: number,
  start: (host: string, port: number) => Promise<L>,
  log: Logger,
  flag: string,
): Promise<L[]> {
  if (host.toLowerCase() !== 'localhost') return [await start(host, port)];
  for (let attempt = 1; ; attempt++) {
    const v4 = await start('127.0.0.1', port);
    try {
      return [v4, await start('::1', v4.address.port)];
    } catch (err) {
      const code = ((err as Error).cause as NodeJS.ErrnoException | undefined)?.code;
      if (code === 'EADDRNOTAVAIL' || code === 'EAFNOSUPPORT') {
        log.debug({ flag }, 'no IPv6 loopback: listening on 127.0.0.1 only');
        return [v4];
      }
      await v4.close(0);
      // Port 0 picked a port that ::1 has taken: pick again.
      if (port !== 0 || code !== 'EADDRINUSE' || attempt >= 5) throw err;
    }
  }
}

/**
 * Why the proxy could not listen on host:port, or undefined: binds and closes at once as
 * startOnLoopbacks binds (`localhost`: 127.0.0.1, then ::1 where this machine has it). `at` names
 * which of localhost's two refused.
 */
export async function bindRefusal(host: string, port: number): Promise<{ at?: string; err: NodeJS.ErrnoException } | undefined> {
  if (host.toLowerCase() !== 'localhost') return bindOnce(host, port).then((err) => err && { err });
  const v4 = await bindOnce('127.0.0.1', port);
  if (v4) return { at: '127.0.0.1', err: v4 };
  const v6 = await bindOnce('::1', port);
  return v6 && v6.code !== 'EADDRNOTAVAIL' && v6.code !== 'EAFNOSUPPORT' ? { at: '[::1]', err: v6 } : undefined;
}

function bindOnce(host: string, port: number): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', resolve);
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}
