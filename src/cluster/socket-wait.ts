// A bound for an API request that counts before it has a socket (list-watch.ts bounds its own).
import type http from 'node:http';

/**
 * A request's setTimeout counts only once it has a socket, and one destroyed before that says
 * nothing until one comes: an agent still dialling (a proxy's CONNECT) would hold it for ever.
 * `onTimeout` runs (and the request is destroyed) when no socket came within `ms`.
 */
export function untilSocket(req: http.ClientRequest, ms: number, onTimeout: () => void): void {
  const timer = setTimeout(() => {
    req.destroy();
    onTimeout();
  }, ms);
  req.once('socket', () => clearTimeout(timer));
  req.once('close', () => clearTimeout(timer));
}
