// GET /proxy.pac on the HTTP listener: the proxy auto-config file for this proxy's routing table
// (routing/pac.ts writes it). Who may have it is decided by the connection's peer address, never
// by a header the client chooses:
// - a peer on this machine (loopback, a unix socket) gets it without credentials, as browsers
//   fetch it, when the Host is a loopback literal or "localhost": a web page that makes the
//   browser resolve its own name to 127.0.0.1 (DNS rebinding) sends its own Host and gets 403;
// - any other peer needs the proxy's credentials, as for everything else it asks of the
//   listener (Basic, in Authorization — a PAC URL with user:password@ — or Proxy-Authorization):
//   the file names every namespace of the default cluster and the routing table's rules.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { isLoopbackHost } from '../core/address.js';
import { WRONG_CREDENTIALS, type ProxyAuth } from '../auth/credentials.js';
import { ProxyAuthRequiredError } from '../core/errors.js';
import { clientSource } from './server-base.js';
import { parseBasicCredentials, PROXY_AUTH_REALM } from './http-auth.js';

export const PAC_PATH = '/proxy.pac';
/** The PAC MIME type browsers expect (Netscape's proposal; Chrome and Firefox accept it). */
const PAC_TYPE = 'application/x-ns-proxy-autoconfig';

/** Whether this request is for the PAC file (origin-form GET/HEAD of /proxy.pac). */
export function isPacRequest(req: IncomingMessage): boolean {
  return (req.method === 'GET' || req.method === 'HEAD') && (req.url === PAC_PATH || req.url?.startsWith(`${PAC_PATH}?`) === true);
}

/** Host header → host without port; undefined when absent or malformed. */
function hostOf(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^(?:\[([^\]]+)\]|([^:]+))(?::\d+)?$/.exec(header.trim());
  return m ? (m[1] ?? m[2])!.toLowerCase() : undefined;
}

/** A peer on this machine: a unix socket (no remote address) or a loopback address. */
function peerIsLocal(req: IncomingMessage): boolean {
  const address = req.socket.remoteAddress;
  return address === undefined || isLoopbackHost(address);
}

function refuse(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, {
    'Content-Type': 'text/plain; charset=utf-8',
    'X-Content-Type-Options': 'nosniff',
    'Content-Length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

/** Told of each refusal for want of credentials (the listener's stats: a log line, status's counts); `info` when none were sent. */
export type PacRefused = (err: ProxyAuthRequiredError, level: 'warn' | 'info') => void;

export function servePac(
  req: IncomingMessage,
  res: ServerResponse,
  pac: (reachedAt?: string) => string,
  auth?: ProxyAuth,
  refused: PacRefused = () => undefined,
): void {
  if (!peerIsLocal(req)) {
    if (auth) {
      const creds = parseBasicCredentials(req.headers.authorization) ?? parseBasicCredentials(req.headers['proxy-authorization']);
      if (!creds || !auth.verify(creds.username, creds.password)) {
        // A guess at the proxy password, as on the proxy's own requests: a warn line (rate-limited) and counted.
        if (creds) refused(new ProxyAuthRequiredError(`${WRONG_CREDENTIALS} (asking for the PAC file)`), 'warn');
        else refused(new ProxyAuthRequiredError('the PAC file needs the proxy credentials from another machine'), 'info');
        const answer = () => {
          if (!res.writableEnded && !res.destroyed)
            refuse(res, 401, "kubectl-proxyout: the PAC file needs the proxy's credentials from another machine (http://USER:PASSWORD@HOST:PORT/proxy.pac)\n", {
              'WWW-Authenticate': `Basic realm="${PROXY_AUTH_REALM}", charset="UTF-8"`,
            });
        };
        // Wrong credentials wait, as for proxy requests (auth/throttle.ts); none at all are answered at once.
        if (creds) auth.throttle.delayFailure(clientSource(req.socket), answer, () => req.socket.destroyed);
        else answer();
        return;
      }
    }
  } else {
    const host = hostOf(req.headers.host);
    const literalLoopback = host !== undefined && (host === 'localhost' || (isIP(host) !== 0 && isLoopbackHost(host)));
    if (!literalLoopback)
      return refuse(res, 403, 'kubectl-proxyout: the PAC file is served only to http://127.0.0.1:PORT/proxy.pac or http://localhost:PORT/proxy.pac\n');
  }
  let text: string;
  try {
    // The address this browser reached us at, so a wildcard listener is named as it can reach it.
    text = pac(req.socket.localAddress);
  } catch (err) {
    // Every listener is a unix socket: no PAC file can name one a browser could use.
    const body = `kubectl-proxyout: no PAC file: ${(err as Error).message}\n`;
    res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff', 'Content-Length': Buffer.byteLength(body) });
    res.end(req.method === 'HEAD' ? undefined : body);
    return;
  }
  res.writeHead(200, { 'Content-Type': PAC_TYPE, 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff', 'Content-Length': Buffer.byteLength(text) });
  res.end(req.method === 'HEAD' ? undefined : text);
}
