// Who may have the live page: decided, in this order, by the connection's peer address (loopback
// only; the server is also bound to loopback), the Host header (a loopback name or address with
// the port the connection came in on: a DNS-rebinding page sends its own name), the Origin when
// there is one (the same loopback origin), then the per-start token in `?token=`. The page's
// files are the same for everyone and need no token; its data (the event stream) does. The
// token is never a cookie: cookies are per host, not per port, so every other server on
// 127.0.0.1 the browser visits would receive it. A refusal is a 403 with a short text that
// repeats nothing of the request.
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { timingSafeEqual, randomBytes } from 'node:crypto';
import { isLoopbackHost } from '../core/address.js';

/** A fresh token: 192 random bits, URL-safe. */
export function newPageToken(): string {
  return randomBytes(24).toString('base64url');
}

/** "host[:port]" (an IPv6 literal in brackets) → its parts; undefined when malformed. */
export function splitHostHeader(value: string | undefined): { host: string; port?: number } | undefined {
  if (!value) return undefined;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s/@]+))(?::(\d{1,5}))?$/.exec(value.trim());
  if (!m) return undefined;
  return { host: (m[1] ?? m[2])!.toLowerCase(), ...(m[3] !== undefined ? { port: Number(m[3]) } : {}) };
}

/** localhost, or a loopback IP literal: the names a loopback-bound page may be asked for. */
function loopbackName(host: string): boolean {
  return host === 'localhost' || (isIP(host) !== 0 && isLoopbackHost(host));
}

/** Host names this connection's own port with localhost or a loopback IP literal. */
export function addressedHere(req: IncomingMessage): boolean {
  const host = splitHostHeader(req.headers.host);
  return host !== undefined && loopbackName(host.host) && (host.port ?? 80) === req.socket.localPort;
}

/** `token`: the request carries the right token (a wrong one is refused). */
export type Access = { ok: true; token: boolean } | { ok: false; why: string };

export function checkAccess(req: IncomingMessage, token: string): Access {
  const peer = req.socket.remoteAddress;
  if (peer === undefined || !isLoopbackHost(peer)) return { ok: false, why: 'the live page is served to this machine only' };
  const port = req.socket.localPort;
  if (!addressedHere(req)) return { ok: false, why: 'the live page answers only to http://127.0.0.1:PORT/ or http://localhost:PORT/ (its own port)' };
  const origin = req.headers.origin;
  if (origin !== undefined) {
    const m = /^http:\/\/(.+)$/.exec(origin);
    const from = m ? splitHostHeader(m[1]) : undefined;
    if (!from || !loopbackName(from.host) || (from.port ?? 80) !== port) return { ok: false, why: 'requests from other sites are refused' };
  }
  const query = tokenInQuery(req.url ?? '');
  if (query === undefined) return { ok: true, token: false };
  return sameToken(query, token) ? { ok: true, token: true } : { ok: false, why: 'wrong token' };
}

/** Why a request for the page's data without the token is refused. */
export const NO_TOKEN = 'open the URL with ?token= that `kubectl proxyout ui` (or the proxy) printed';

function tokenInQuery(url: string): string | undefined {
  const q = url.indexOf('?');
  return q < 0 ? undefined : (new URLSearchParams(url.slice(q + 1)).get('token') ?? undefined);
}

function sameToken(given: string, token: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}
