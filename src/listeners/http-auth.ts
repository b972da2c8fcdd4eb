// Proxy authentication for the HTTP front end: the `Basic` scheme (RFC 7617) in
// `Proxy-Authorization`, answered with 407 and `Proxy-Authenticate` (RFC 9110 §11.7.1, §15.5.8)
// for absolute-form requests and CONNECT alike. The header is hop-by-hop: http-forward.ts never
// passes it on, and it is never logged.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type net from 'node:net';
import { ProxyAuthRequiredError } from '../core/errors.js';
import { WRONG_CREDENTIALS } from '../auth/credentials.js';
import type { ListenerContext } from './listener.js';
import type { UnauthenticatedConnections } from './unauthenticated.js';
import { clientName, clientSource, closingAfterAnswer, endWithReply } from './server-base.js';
import { rawErrorResponse } from './http-server.js';

export const PROXY_AUTH_REALM = 'kubectl-proxyout';
// charset (RFC 7617 §2.1): credentials are compared as UTF-8, so ask clients to encode them so.
export const PROXY_AUTHENTICATE = `Basic realm="${PROXY_AUTH_REALM}", charset="UTF-8"`;

/** user-id and password from a `Basic` credentials header value, or undefined if it is not one. */
export function parseBasicCredentials(header: string | undefined): { username: Buffer; password: Buffer } | undefined {
  if (header === undefined) return undefined;
  const m = /^\s*basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, 'base64');
  const colon = decoded.indexOf(0x3a);
  if (colon < 0) return undefined;
  return { username: decoded.subarray(0, colon), password: decoded.subarray(colon + 1) };
}

interface Denial {
  error: ProxyAuthRequiredError;
  /** Credentials were presented and are wrong: the answer waits (auth/throttle.ts). */
  wrong: boolean;
  /**
   * No Proxy-Authorization at all: the 407 challenge that clients with credentials wait for
   * before sending them (git, libcurl's anyauth, browsers). Logged at info: in `exec` a warning
   * reaches CMD's terminal on every git command.
   */
  challenge?: true;
}

const logLevelOf = (denied: Denial) => (denied.challenge ? 'info' : 'warn');

/** undefined when the request may pass; else the error to answer with (407). */
export function checkProxyAuthorization(ctx: ListenerContext, req: IncomingMessage): Denial | undefined {
  if (!ctx.auth) return undefined;
  const header = req.headers['proxy-authorization'];
  if (header === undefined)
    return { error: new ProxyAuthRequiredError('proxy authentication required: send proxy credentials (Basic)'), wrong: false, challenge: true };
  const creds = parseBasicCredentials(header);
  if (!creds) return { error: new ProxyAuthRequiredError('proxy authentication required: only the Basic scheme is supported'), wrong: false };
  // Checked before any throttling: a right password always passes (auth/throttle.ts).
  if (!ctx.auth.verify(creds.username, creds.password)) return { error: new ProxyAuthRequiredError(WRONG_CREDENTIALS), wrong: true };
  return undefined;
}

/** Sends `answer` now, or after the throttle's delay for wrong credentials. */
function answerDenial(ctx: ListenerContext, req: IncomingMessage, denied: Denial, answer: () => void): void {
  if (denied.wrong && ctx.auth) ctx.auth.throttle.delayFailure(clientSource(req.socket), answer, () => req.socket.destroyed);
  else answer();
}

/**
 * Wraps the absolute-form request handler: requests without valid credentials get 407. A
 * connection that has never authenticated is closed after its 407 (a client that has the
 * credentials comes back with them; one that does not may not keep the connection).
 */
export function requireProxyAuth(
  ctx: ListenerContext,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  unauthenticated?: UnauthenticatedConnections,
): (req: IncomingMessage, res: ServerResponse) => void {
  if (!ctx.auth) return handler;
  return (req, res) => {
    const denied = checkProxyAuthorization(ctx, req);
    if (!denied) {
      unauthenticated?.authenticated(req.socket);
      return handler(req, res);
    }
    const client = clientName(req.socket);
    const reply = ctx.stats.failed('http-forward', client, undefined, denied.error, logLevelOf(denied));
    const body = `kubectl-proxyout: ${reply.message}\n`;
    // A request body we will not read must not be taken for the next request: close after it.
    const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
    const close = hasBody || !unauthenticated?.isAuthenticated(req.socket);
    // Requests pipelined behind this one are parsed (and handed on) before our answer goes out:
    // none may run once it says close (RFC 9112 §9.6), whatever credentials they carry.
    if (close) closingAfterAnswer.add(req.socket);
    answerDenial(ctx, req, denied, () => {
      if (res.destroyed || res.writableEnded) return;
      res.writeHead(reply.http, {
        'Proxy-Authenticate': PROXY_AUTHENTICATE,
        'Content-Type': 'text/plain; charset=utf-8',
        'X-Content-Type-Options': 'nosniff',
        'Content-Length': Buffer.byteLength(body),
        ...(close ? { Connection: 'close' } : {}),
      });
      res.end(body);
    });
  };
}

/** For CONNECT: true when the client may go on; otherwise it is (or will be) answered 407 and closed. */
export function authorizeConnect(
  ctx: ListenerContext,
  req: IncomingMessage,
  socket: net.Socket,
  client: string,
  unauthenticated?: UnauthenticatedConnections,
): boolean {
  const denied = checkProxyAuthorization(ctx, req);
  if (!denied) {
    unauthenticated?.authenticated(socket);
    return true;
  }
  const reply = ctx.stats.failed('http-connect', client, undefined, denied.error, logLevelOf(denied));
  answerDenial(ctx, req, denied, () =>
    endWithReply(socket, rawErrorResponse(reply.http, `kubectl-proxyout: ${reply.message}`, [`Proxy-Authenticate: ${PROXY_AUTHENTICATE}`])),
  );
  return false;
}
