// What stands in front of an API server in the field, on loopback: a TLS reverse proxy under a
// name of its own (a certificate from its own CA) that serves the API under a path prefix, as
// Rancher does (`https://rancher.example/k8s/clusters/c-abc123`): it strips the prefix and
// forwards requests and upgrades (SPDY, WebSocket) to the real API server. Its behaviour can be
// changed while it runs: refuse SPDY upgrades (as fronts that only pass WebSockets), refuse every
// upgrade with an HTML page, cut connections idle for a while (as a cloud load balancer), gzip
// answers nobody asked to be gzipped, or redirect everything to an SSO login page.
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import zlib from 'node:zlib';
import { once } from 'node:events';
import { SimPki } from '../sim/pki.js';

export interface FrontBehaviour {
  /**
   * Which upgrades pass: all, WebSocket only (SPDY answered `refuseStatus`), none (all answered
   * so), or `strip`: sent on as plain requests without Upgrade and Connection (a proxy that does
   * not know upgrades drops those hop-by-hop headers), the API server's answer passed back.
   */
  upgrades: 'all' | 'websocket-only' | 'none' | 'strip';
  /** The status a refused upgrade gets, with an HTML body. */
  refuseStatus: number;
  /**
   * Cut a client connection idle this long (0: never): with a FIN, with a RST (`idle: 'rst'`), or
   * `silent`ly as AWS's NLB does — the flow is forgotten, and the client's next bytes on an
   * upgraded connection get a RST.
   */
  idleMs: number;
  idle: 'fin' | 'rst' | 'silent';
  /** gzip JSON answers although the client did not ask for it. */
  gzip: boolean;
  /** Answer every request 302 to this login page (an SSO front whose session expired). */
  loginRedirect?: string;
  /** Answer every request with this status and an HTML page (an allow-list, a gateway down). */
  refuseAll?: number;
}

export interface ApiFront {
  /** https://127.0.0.1:PORT/PREFIX — the server URL for a kubeconfig. */
  url: string;
  port: number;
  /** The front's CA (certificate-authority-data for the kubeconfig). */
  caPem: string;
  /** The name its certificate is for. */
  hostName: string;
  behaviour: FrontBehaviour;
  /** What reached it: method, path as asked (prefix included), the Upgrade header, the TLS SNI name. */
  seen: Array<{ method: string; path: string; upgrade?: string; sni?: string }>;
  /** Connections it cut for idleness. */
  cut: number;
  close(): Promise<void>;
}

/** The name the client sent in the TLS handshake (SNI), if any: fronts that route by it need it. */
const sniOf = (req: http.IncomingMessage): string | undefined => {
  const name = (req.socket as tls.TLSSocket).servername;
  return typeof name === 'string' ? name : undefined;
};

const HTML = (title: string) => `<!DOCTYPE html>\n<html><head><title>${title}</title></head><body><h1>${title}</h1></body></html>\n`;

export async function startApiFront(opts: { upstream: string; upstreamCaPem: string; prefix?: string; hostName?: string }): Promise<ApiFront> {
  const prefix = (opts.prefix ?? '').replace(/\/$/, '');
  const hostName = opts.hostName ?? 'rancher.example';
  const pki = new SimPki();
  const { keyPem, certPem } = pki.hostCert([hostName]);
  const up = new URL(opts.upstream);
  const upstreamTls = { host: up.hostname, port: Number(up.port), ca: opts.upstreamCaPem, servername: 'localhost' };
  const sockets = new Set<net.Socket>();
  const front: ApiFront = {
    url: '',
    port: 0,
    caPem: pki.caPem,
    hostName,
    behaviour: { upgrades: 'all', refuseStatus: 400, idleMs: 0, idle: 'fin', gzip: false },
    seen: [],
    cut: 0,
    close: async () => undefined,
  };
  const strip = (url: string): string | undefined => {
    if (!prefix) return url;
    if (url === prefix) return '/';
    return url.startsWith(`${prefix}/`) || url.startsWith(`${prefix}?`) ? url.slice(prefix.length) : undefined;
  };
  const server = https.createServer({ key: keyPem, cert: certPem, ALPNProtocols: ['http/1.1'] }, (req, res) => {
    front.seen.push({ method: req.method ?? '', path: req.url ?? '', sni: sniOf(req) });
    const b = front.behaviour;
    if (b.loginRedirect) {
      res.writeHead(302, { Location: b.loginRedirect, 'Content-Type': 'text/html' }).end(HTML('Redirecting to login'));
      return;
    }
    if (b.refuseAll) {
      res.writeHead(b.refuseAll, { 'Content-Type': 'text/html' }).end(HTML(`${b.refuseAll} ${http.STATUS_CODES[b.refuseAll] ?? ''}`));
      return;
    }
    const path = strip(req.url ?? '/');
    if (path === undefined) {
      res.writeHead(404, { 'Content-Type': 'text/html' }).end(HTML('404 Not Found'));
      return;
    }
    const headers = { ...req.headers, host: up.host };
    const upReq = https.request({ ...upstreamTls, method: req.method, path, headers, agent: false }, (upRes) => {
      const out = { ...upRes.headers, 'x-front': 'api-front' };
      const json = /json/.test(String(upRes.headers['content-type'] ?? ''));
      if (b.gzip && json && !upRes.headers['content-encoding']) {
        delete out['content-length'];
        out['content-encoding'] = 'gzip';
        res.writeHead(upRes.statusCode ?? 502, out);
        res.flushHeaders();
        // Flush each piece: a watch's events must not wait for the compressor's buffer.
        const gz = zlib.createGzip({ flush: zlib.constants.Z_SYNC_FLUSH });
        upRes.pipe(gz).pipe(res);
      } else {
        res.writeHead(upRes.statusCode ?? 502, out);
        // Headers leave at once, as a proxy's do: an empty watch sends no body for a while.
        res.flushHeaders();
        upRes.pipe(res);
      }
    });
    upReq.on('error', () => res.destroy());
    res.on('close', () => upReq.destroy());
    req.pipe(upReq);
  });
  server.on('upgrade', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    const upgrade = String(req.headers.upgrade ?? '');
    front.seen.push({ method: req.method ?? '', path: req.url ?? '', upgrade, sni: sniOf(req) });
    client.on('error', () => undefined);
    const b = front.behaviour;
    const path = strip(req.url ?? '/');
    const refuse = (status: number) =>
      client.end(
        `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n${HTML(`${status} ${http.STATUS_CODES[status] ?? ''}`)}`,
      );
    if (b.loginRedirect)
      return client.end(`HTTP/1.1 302 Found\r\nLocation: ${b.loginRedirect}\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n${HTML('Redirecting')}`);
    if (path === undefined) return refuse(404);
    if (b.upgrades === 'strip') return forwardStripped(req, client, path);
    if (b.upgrades === 'none' || (b.upgrades === 'websocket-only' && upgrade.toLowerCase() !== 'websocket')) return refuse(b.refuseStatus);
    const upstream = tls.connect(upstreamTls, () => {
      const lines = [`${req.method} ${path} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        const name = req.rawHeaders[i]!;
        lines.push(`${name}: ${name.toLowerCase() === 'host' ? up.host : req.rawHeaders[i + 1]}`);
      }
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length) upstream.write(head);
      // Piped by hand: a flow the front forgot (idle 'silent') answers the next bytes with a RST.
      const raw = (client as net.Socket & { _parent?: net.Socket })._parent ?? client;
      const relay = (from: net.Socket, to: net.Socket) => {
        from.on('data', (chunk: Buffer) => {
          if (forgotten.has(raw)) return raw.resetAndDestroy();
          if (!to.write(chunk)) from.pause();
        });
        to.on('drain', () => from.resume());
        from.on('end', () => to.end());
      };
      relay(client, upstream);
      relay(upstream, client);
    });
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  const forwardStripped = (req: http.IncomingMessage, client: net.Socket, path: string) => {
    const headers: http.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(req.headers)) if (!/^(upgrade|connection|sec-websocket-.*)$/i.test(k)) headers[k] = v;
    headers.host = up.host;
    const upReq = https.request({ ...upstreamTls, method: req.method, path, headers, agent: false }, (upRes) => {
      const lines = [`HTTP/1.1 ${upRes.statusCode} ${upRes.statusMessage ?? ''}`, 'Connection: close'];
      for (let i = 0; i < upRes.rawHeaders.length; i += 2) {
        if (!/^(connection|transfer-encoding)$/i.test(upRes.rawHeaders[i]!)) lines.push(`${upRes.rawHeaders[i]}: ${upRes.rawHeaders[i + 1]}`);
      }
      client.write(`${lines.join('\r\n')}\r\n\r\n`);
      upRes.pipe(client);
    });
    upReq.on('error', () => client.destroy());
    upReq.end();
  };
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      armed.delete(socket);
    });
    socket.on('error', () => undefined);
    // An idle timeout as a load balancer's: counted on the TCP connection, either direction.
    armed.set(socket, front.behaviour.idleMs);
    socket.setTimeout(front.behaviour.idleMs);
    socket.on('timeout', () => {
      if (!front.behaviour.idleMs) return;
      front.cut++;
      if (front.behaviour.idle === 'silent') forgotten.add(socket);
      else if (front.behaviour.idle === 'rst') socket.resetAndDestroy();
      else socket.destroy();
    });
  });
  // A changed idle timeout applies to the connections already open too (from now on).
  const armed = new Map<net.Socket, number>();
  /** Connections cut silently: nothing is said until the client sends again. */
  const forgotten = new WeakSet<net.Socket>();
  const rearm = setInterval(() => {
    for (const socket of sockets) {
      if (armed.get(socket) === front.behaviour.idleMs) continue;
      armed.set(socket, front.behaviour.idleMs);
      socket.setTimeout(front.behaviour.idleMs);
    }
  }, 100);
  rearm.unref();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  front.port = (server.address() as net.AddressInfo).port;
  front.url = `https://127.0.0.1:${front.port}${prefix}`;
  front.close = async () => {
    clearInterval(rearm);
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return front;
}
