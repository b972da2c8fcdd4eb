// The live page over HTTP: its files (ui/page-assets.ts) and its data as server-sent events
// (HTML Living Standard §9.2, text/event-stream) at /ui/events, one `data:` line per message.
// Access is page-access.ts's decision. Served by `kubectl proxyout ui` (startPageServer, on
// loopback) and by a foreground proxy's HTTP listener at / (listeners/http-server.ts).
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MAX_UNSENT_FEED_BYTES, type FeedMessage } from './feed.js';
import { NO_TOKEN, addressedHere, checkAccess } from './page-access.js';
import { PAGE_ASSETS } from './page-assets.js';

export const EVENTS_PATH = '/ui/events';
/** A comment this often keeps idle connections (and proxies in between) from timing out. */
const HEARTBEAT_MS = 15_000;

/** A feed message with the proxy it comes from; `gone`: that proxy stopped or no longer answers. */
export type PageMessage = (FeedMessage & { proxy: string }) | { type: 'gone'; proxy: string; reason: string };

/** Where the page's data comes from: one proxy's feed, or every managed proxy's (managed/ui.ts). */
export interface PageHub {
  /** Sends each proxy's snapshot, then its messages, until the returned function is called. */
  subscribe(send: (message: PageMessage) => void): () => void;
}

/** Several sources as one hub: a subscriber gets every one's messages (a foreground proxy's own and the managed ones'). */
export function combineHubs(hubs: readonly PageHub[]): PageHub {
  return {
    subscribe(send) {
      const stops = hubs.map((hub) => hub.subscribe(send));
      return () => stops.forEach((stop) => stop());
    },
  };
}

/**
 * The requests the page answers on a proxy's HTTP listener: origin-form GET/HEAD of /ui/… or
 * /?…, and of / when addressed to this listener by a loopback name. Any other `GET /` stays the
 * proxy's "not a proxy request" answer.
 */
export function claimsRequest(req: IncomingMessage): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  const url = req.url ?? '';
  if (url.startsWith('/ui/') || url.startsWith('/?')) return true;
  return url === '/' && addressedHere(req);
}

export interface PageHandler {
  (req: IncomingMessage, res: ServerResponse): void;
  /** Ends the event streams (at stop: a browser left open must not hold the drain). */
  close(): void;
}

const SECURITY_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'Cache-Control': 'no-store',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  // Nothing from elsewhere, no inline script or style: a name from the cluster that slipped into markup could not run.
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
};

function plain(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

export function pageHandler(token: string, hub: PageHub): PageHandler {
  const streams = new Set<ServerResponse>();
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const access = checkAccess(req, token);
    if (!access.ok) return plain(res, 403, `kubectl-proxyout: ${access.why}\n`);
    if (req.method !== 'GET' && req.method !== 'HEAD') return plain(res, 405, 'kubectl-proxyout: GET only\n', { Allow: 'GET, HEAD' });
    const path = (req.url ?? '/').split('?')[0]!;
    if (path === EVENTS_PATH) return access.token ? serveEvents(res, hub, streams) : plain(res, 403, `kubectl-proxyout: ${NO_TOKEN}\n`);
    const asset = PAGE_ASSETS[path];
    if (!asset) return plain(res, 404, Object.keys(PAGE_ASSETS).length ? 'kubectl-proxyout: no such page\n' : 'kubectl-proxyout: the page was not built in\n');
    const body = Buffer.from(asset.body);
    res.writeHead(200, { ...SECURITY_HEADERS, 'Content-Type': asset.type, 'Content-Length': body.length });
    res.end(req.method === 'HEAD' ? undefined : body);
  };
  return Object.assign(handle, {
    close: () => {
      for (const res of streams) res.end();
      streams.clear();
    },
  });
}

function serveEvents(res: ServerResponse, hub: PageHub, streams: Set<ServerResponse>): void {
  res.writeHead(200, { ...SECURITY_HEADERS, 'Content-Type': 'text/event-stream; charset=utf-8', Connection: 'keep-alive' });
  res.write('retry: 2000\n\n');
  streams.add(res);
  const send = (message: PageMessage): void => {
    if (res.writableEnded || res.destroyed) return;
    // Behind by that much: cut off; EventSource reconnects and gets a fresh snapshot.
    if (res.writableLength > MAX_UNSENT_FEED_BYTES) return void res.destroy();
    res.write(`data: ${JSON.stringify(message)}\n\n`);
  };
  const heartbeat = setInterval(() => res.write(': alive\n\n'), HEARTBEAT_MS).unref();
  let unsubscribe: (() => void) | undefined;
  res.once('close', () => {
    clearInterval(heartbeat);
    streams.delete(res);
    unsubscribe?.();
  });
  unsubscribe = hub.subscribe(send);
  if (res.destroyed) unsubscribe();
}

export interface PageServer {
  /** The URL with the token, to print or open. */
  readonly url: string;
  readonly address: AddressInfo;
  close(): Promise<void>;
}

/** A server for the page alone, on a loopback address (127.0.0.1 unless given), port 0 for any free one. */
export async function startPageServer(hub: PageHub, token: string, port = 0, host = '127.0.0.1'): Promise<PageServer> {
  const handler = pageHandler(token, hub);
  const server = http.createServer({ requestTimeout: 0, headersTimeout: 10_000 }, handler);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  return {
    url: pageUrl(address, token),
    address,
    close: () =>
      new Promise<void>((resolve) => {
        handler.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** http://HOST:PORT of a listener, an IPv6 address in brackets; 0.0.0.0 and :: as the loopback a browser here would use. */
export function browserOrigin(address: Pick<AddressInfo, 'address' | 'port' | 'family'>): string {
  const host =
    address.address === '0.0.0.0' ? '127.0.0.1' : address.address === '::' ? '[::1]' : address.address.includes(':') ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

/** The page's URL with its token. */
export function pageUrl(address: Pick<AddressInfo, 'address' | 'port' | 'family'>, token: string): string {
  return `${browserOrigin(address)}/?token=${token}`;
}
