// A client's WebSocket opening handshake (RFC 6455 §4.1, §4.2.2): GET with Upgrade: websocket, a
// fresh Sec-WebSocket-Key, the subprotocol we ask for; the server must answer 101 with
// Sec-WebSocket-Accept = base64(SHA-1(key + GUID)). Node's http client does the request through
// whatever the kubeconfig chose (TLS material, auth headers, a proxy agent or a `via` route) and
// hands over the socket at the 101. We check the subprotocol ourselves: `ws` refuses
// "SPDY/3.1+portforward.k8s.io" ("/" is not a token character, yet client-go sends it).
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { Duplex } from 'node:stream';
import tls from 'node:tls';
import type { ApiRequestOptions } from '../../cluster/api.js';
import { SlabReads } from './slab-reads.js';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
/** The most of a refusal's body we keep (for the message; the status decides). */
export const REFUSAL_BODY_MAX = 16 * 1024;
/**
 * A 101 without `Upgrade: websocket` and `Connection: Upgrade` reaches Node's client as a
 * response, not an upgrade: no refusal (it says nothing of the subprotocols), a broken handshake,
 * as gorilla/websocket (client-go's) calls it.
 */
export const UPGRADE_HEADERS_MISSING =
  'the server answered 101 without the Upgrade: websocket and Connection: Upgrade headers (a proxy or load balancer in front of the API server may drop them)';

/** The server answered with something other than 101 (its status and the start of its body). */
export class UpgradeRefusal extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
    /** A redirect's Location header. */
    readonly location?: string,
  ) {
    super(`HTTP ${status}`);
    this.name = 'UpgradeRefusal';
  }
}

export interface Upgraded {
  socket: net.Socket;
  /** Bytes the server sent right behind the 101 (already frames). */
  head: Buffer;
  /** The subprotocol the server chose, if any. */
  protocol?: string;
  /** A direct TLS connection's reads (slab-reads.ts); without it the socket emits 'data'. */
  reads?: SlabReads;
}

export function acceptFor(key: string): string {
  return createHash('sha1')
    .update(key + GUID)
    .digest('base64');
}

/** Upgrades `url` (ws: or wss:) to a WebSocket; rejects with UpgradeRefusal or the network error. */
export function upgradeToWebSocket(url: URL, conn: ApiRequestOptions, protocol: string, timeoutMs: number): Promise<Upgraded> {
  return new Promise((resolve, reject) => {
    const key = randomBytes(16).toString('base64');
    const secure = url.protocol === 'wss:';
    const { tlsMayBeIntercepted: _, ...options } = conn;
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    // TLS straight to the server: read into our own slabs. Through an agent (a proxy, a `via`
    // route) the socket is the agent's.
    const direct = secure && !conn.agent ? slabConnection(options, host) : undefined;
    const req = (secure ? https : http).request({
      ...options,
      // No agent of ours: the socket leaves any pool at the upgrade, and a kept-alive one is not wanted.
      ...(direct ? { agent: undefined, createConnection: direct.connect } : { agent: conn.agent ?? false }),
      method: 'GET',
      host,
      port: url.port || (secure ? 443 : 80),
      path: `${url.pathname}${url.search}`,
      headers: {
        ...conn.headers,
        Connection: 'Upgrade',
        Upgrade: 'websocket',
        'Sec-WebSocket-Version': '13',
        'Sec-WebSocket-Key': key,
        'Sec-WebSocket-Protocol': protocol,
      },
    });
    let settled = false;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      reject(err);
    };
    const timer = setTimeout(() => fail(new Error(`the WebSocket upgrade was not answered within ${timeoutMs} ms`)), timeoutMs);
    timer.unref();
    req.on('error', fail);
    req.on('response', (res) => {
      if (res.statusCode === 101) return fail(new Error(`WebSocket upgrade failed: ${UPGRADE_HEADERS_MISSING}`));
      const chunks: Buffer[] = [];
      let kept = 0;
      const refused = () => fail(new UpgradeRefusal(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'), res.headers.location));
      res.on('data', (c: Buffer) => {
        chunks.push(c.subarray(0, REFUSAL_BODY_MAX - kept));
        kept += Math.min(c.length, REFUSAL_BODY_MAX - kept);
        // The start is enough for the message: a body that never ends must not hold the open
        // until its timeout, and lose the status (websocket-v4.ts does the same).
        if (kept >= REFUSAL_BODY_MAX) refused();
      });
      res.on('end', refused);
      res.on('error', () => fail(new UpgradeRefusal(res.statusCode ?? 0, '')));
    });
    req.on('upgrade', (res, socket: net.Socket, head: Buffer) => {
      if (settled) return void socket.destroy();
      const upgrade = res.headers.upgrade;
      const problem =
        res.statusCode !== 101
          ? `HTTP ${res.statusCode} with an upgrade`
          : upgrade?.toLowerCase() !== 'websocket'
            ? `the server upgraded to "${upgrade ?? ''}", not websocket`
            : res.headers['sec-websocket-accept'] !== acceptFor(key)
              ? 'the server answered with a wrong Sec-WebSocket-Accept'
              : res.headers['sec-websocket-extensions']
                ? 'the server chose an extension we did not offer'
                : undefined;
      if (problem) {
        socket.destroy();
        return fail(new Error(`WebSocket upgrade failed: ${problem}`));
      }
      settled = true;
      clearTimeout(timer);
      const p = res.headers['sec-websocket-protocol'];
      const protocol = Array.isArray(p) ? p.join(',') : p;
      // Synchronously, while the HTTP client still reads: what comes behind the 101 is kept for the WebSocket.
      if (direct) resolve({ socket: direct.upgraded(), head, protocol, reads: direct.reads });
      else {
        // Node's HTTP client took its 'error' listener off at the upgrade: as for a direct socket
        // (upgraded()), an error before the WebSocket listens must not be an unhandled event.
        socket.on('error', ignoreUntilOwned);
        resolve({ socket, head, protocol });
      }
    });
    req.end();
  });
}

/**
 * A TLS socket that reads into SlabReads, and the Duplex Node's HTTP client does the upgrade
 * through: its writes go to the socket, the socket's reads and end come to it. At the 101 the
 * WebSocket takes the socket itself (upgraded()); until then destroying the Duplex destroys it.
 */
function slabConnection(options: https.RequestOptions, host: string) {
  let view: Duplex | undefined;
  const reads = new SlabReads((piece) => view?.push(piece));
  let socket: tls.TLSSocket | undefined;
  const ended = () => view?.push(null);
  const failed = (err: Error) => view?.destroy(err);
  const closed = () => view?.destroy();
  return {
    reads,
    connect: ((opts: https.RequestOptions) => {
      // As Node's https agent does: SNI names the host unless it is an IP address.
      socket = tls.connect({
        ...opts,
        host,
        servername: options.servername ?? (net.isIP(host) ? undefined : host),
        onread: reads.onread,
      } as tls.ConnectionOptions);
      const s = socket;
      // Flowing, so that 'end' is emitted (reads never go through the Readable).
      s.resume();
      s.on('end', ended);
      s.on('error', failed);
      s.on('close', closed);
      view = new Duplex({
        read: () => undefined,
        write: (chunk: Buffer, _enc, cb) => void s.write(chunk, cb),
        final: (cb) => void s.end(cb),
        destroy: (err, cb) => {
          if (view) s.destroy(err ?? undefined);
          cb(err);
        },
      });
      return view;
    }) as unknown as https.RequestOptions['createConnection'],
    upgraded(): net.Socket {
      reads.hold();
      const s = socket!;
      s.off('end', ended);
      s.off('error', failed);
      s.off('close', closed);
      // Until the WebSocket has its own listener (after the caller's await), an error must not be
      // an unhandled 'error' event; the WebSocket sees the close that follows it.
      s.on('error', ignoreUntilOwned);
      view = undefined;
      return s;
    },
  };
}

/** The upgraded socket's listener until the WebSocket adds its own (it sees the close that follows). */
function ignoreUntilOwned(): void {}
