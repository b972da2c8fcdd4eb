// Raw SPDY port-forward sessions against the simulator, for its own tests: tunnelled in a
// WebSocket or plain over the upgraded TLS socket, every stream's replies, data, FIN and RST
// recorded. Not a test file itself.
import https from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import { SpdySession, type SpdyStream } from '../../src/tunnel/spdy/session.js';
import { dialTunnel } from '../../src/tunnel/spdy/tunnel.js';
import type { Headers } from '../../src/tunnel/spdy/framer.js';
import type { SimCluster } from './cluster.js';

export class Recorded {
  readonly chunks: Buffer[] = [];
  replied = false;
  ended = false;
  reset?: number;
  /** The peer's GOAWAY left this stream out (it never took it). */
  unprocessed = false;

  constructor(
    readonly stream: SpdyStream,
    wake: () => void,
  ) {
    stream.onReply = () => {
      this.replied = true;
      wake();
    };
    stream.onData = (d) => {
      this.chunks.push(d);
      wake();
    };
    stream.onEnd = () => {
      this.ended = true;
      wake();
    };
    stream.onReset = (status) => {
      this.reset = status;
      wake();
    };
    stream.onSessionClose = () => wake();
    stream.onUnprocessed = () => {
      this.unprocessed = true;
      wake();
    };
  }

  get bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }

  get text(): string {
    return this.bytes.toString('utf8');
  }
}

export interface RefusedUpgrade {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

const path = (ns: string, pod: string) => `/api/v1/namespaces/${ns}/pods/${pod}/portforward`;

export class RawSpdy {
  readonly session: SpdySession;
  closed = false;
  /** lastGoodStreamId of the peer's GOAWAY, once one came. */
  goAwayLastGood?: number;
  private waiters: Array<() => void> = [];

  private constructor(write: (b: Buffer) => void, end: () => void) {
    this.session = new SpdySession(
      'client',
      { write, close: end },
      {
        onClose: () => {
          this.closed = true;
          this.wake();
        },
        onGoAway: (last) => {
          this.goAwayLastGood = last;
          this.wake();
        },
      },
    );
  }

  /** The WebSocket tunnel (subprotocol SPDY/3.1+portforward.k8s.io). */
  static async tunnel(sim: SimCluster, ns: string, pod: string): Promise<RawSpdy> {
    const url = new URL(sim.server.replace('https:', 'wss:') + path(ns, pod));
    const ws = await dialTunnel(url, { ca: sim.caPem, headers: { Authorization: `Bearer ${sim.adminToken}` } }, 5000);
    const raw = new RawSpdy(
      (b) => ws.send([b], b.length),
      () => ws.close(),
    );
    ws.onData = (d) => raw.session.receive(d);
    ws.onClose(() => raw.session.destroy());
    return raw;
  }

  /** Plain SPDY: POST with Upgrade: SPDY/3.1; a refused upgrade resolves with its response. */
  static plain(sim: SimCluster, ns: string, pod: string, headers: Record<string, string> = {}): Promise<RawSpdy | RefusedUpgrade> {
    const url = new URL(sim.server + path(ns, pod));
    return new Promise((resolve, reject) => {
      const req = https.request(url, {
        method: 'POST',
        ca: sim.caPem,
        agent: false,
        headers: {
          Authorization: `Bearer ${sim.adminToken}`,
          Connection: 'Upgrade',
          Upgrade: 'SPDY/3.1',
          'X-Stream-Protocol-Version': 'portforward.k8s.io',
          ...headers,
        },
      });
      req.on('upgrade', (res, socket: Duplex, head: Buffer) => {
        const raw = new RawSpdy(
          (b) => socket.write(b),
          () => socket.end(),
        );
        Object.assign(raw, { upgradeHeaders: res.headers });
        socket.on('data', (d: Buffer) => raw.session.receive(d));
        socket.on('close', () => raw.session.destroy());
        socket.on('error', () => {});
        if (head.length) raw.session.receive(head);
        resolve(raw);
      });
      req.on('response', (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      });
      req.on('error', reject);
      req.end();
    });
  }

  upgradeHeaders?: IncomingHttpHeaders;

  open(headers: Headers): Recorded {
    return new Recorded(this.session.openStream(headers), () => this.wake());
  }

  /** The error and data streams of one forwarded connection, as kubectl opens them. */
  pair(port: number, requestId: string | number): { error: Recorded; data: Recorded } {
    const common = { port: String(port), requestid: String(requestId) };
    const error = this.open({ streamtype: 'error', ...common });
    const data = this.open({ streamtype: 'data', ...common });
    return { error, data };
  }

  async until(pred: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pred()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.min(left, 50));
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  close(): void {
    this.session.goAway();
    this.session.destroy();
  }

  private wake(): void {
    for (const f of this.waiters.splice(0)) f();
  }
}
