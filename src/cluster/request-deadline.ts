// A bound on one API request. req.setTimeout alone counts idle time on a connected socket: a
// server whose SYNs go unanswered (a VPN down, a firewall that drops) was waited for the OS's
// connect timeout (~2 min), and one silent in the TLS handshake for twice the bound.
import type http from 'node:http';

/** Ends `req` with `error()` when its answer has not begun within `ms`, or its socket idles `ms` after. */
export function boundRequest(req: http.ClientRequest, ms: number, error: () => Error): void {
  const timedOut = () => req.destroy(error());
  const answered = setTimeout(timedOut, ms);
  req.setTimeout(ms, timedOut);
  req.once('response', () => clearTimeout(answered));
  req.once('upgrade', () => clearTimeout(answered));
  req.on('close', () => clearTimeout(answered));
}
