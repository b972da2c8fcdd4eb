// GET /proxy.pac on the HTTP listener: the proxy auto-config file for this proxy's routing table
// (routing/pac.ts writes it). Browsers fetch it directly, without proxy credentials, so it is
// served only to requests whose Host is a loopback literal or "localhost": a web page that makes
// the browser resolve its own name to 127.0.0.1 (DNS rebinding) sends its own Host and gets 403.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { isLoopbackHost } from '../core/address.js';

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

export function servePac(req: IncomingMessage, res: ServerResponse, pac: () => string): void {
  const host = hostOf(req.headers.host);
  const literalLoopback = host !== undefined && (host === 'localhost' || (isIP(host) !== 0 && isLoopbackHost(host)));
  if (!literalLoopback) {
    const body = 'kubectl-proxyout: the PAC file is served only to http://127.0.0.1:PORT/proxy.pac or http://localhost:PORT/proxy.pac\n';
    res.writeHead(403, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
    return;
  }
  let text: string;
  try {
    text = pac();
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
