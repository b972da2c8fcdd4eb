// Raw requests against any API server (the simulator or the real control plane), recording what
// the wire carries rather than what a client library makes of it: status, headers and body of
// plain requests; watch events; the handshake and every frame of a port-forward WebSocket (RFC
// 6455, parsed here so that an empty Sec-WebSocket-Protocol header or a frame's order is seen as
// sent); the frames of SPDY streams tunnelled in a WebSocket (SPDY/3.1+portforward.k8s.io).
// Used by test/integration/sim-conformance.test.ts to hold the simulator to upstream.
import https from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { SpdySession } from '../../src/tunnel/spdy/session.js';
import type { Headers } from '../../src/tunnel/spdy/framer.js';

export interface ProbeTarget {
  label: string;
  server: string;
  caPem: string | Buffer;
  tokens: { admin: string; limited: string };
}

export interface Who {
  /** Which token: admin (default), limited, unknown (one the server never issued), or none (no Authorization header). */
  as?: 'admin' | 'limited' | 'unknown' | 'none';
}

export interface HttpAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function authHeaders(t: ProbeTarget, who: Who): Record<string, string> {
  const as = who.as ?? 'admin';
  if (as === 'none') return {};
  return { Authorization: `Bearer ${as === 'unknown' ? 'a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5' : t.tokens[as]}` };
}

export function httpRequest(
  t: ProbeTarget,
  path: string,
  o: Who & { method?: string; headers?: Record<string, string>; body?: unknown } = {},
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const headers = { ...authHeaders(t, o), ...(o.headers ?? {}), ...(o.body !== undefined ? { 'Content-Type': 'application/json' } : {}) };
    const req = https.request(`${t.server}${path}`, { method: o.method ?? 'GET', ca: t.caPem, agent: false, headers, timeout: 15_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${t.label}: ${path} timed out`)));
    req.on('error', reject);
    req.end(o.body === undefined ? undefined : JSON.stringify(o.body));
  });
}

export interface WatchRead {
  status: number;
  events: Array<{ type: string; object: any }>;
  /** The server ended the response (rather than us, after `until` held or the time ran out). */
  ended: boolean;
  /** The body when it was not a stream of events (a refusal). */
  body?: string;
}

/** A watch: its events until `until` says stop, the server ends it, or `maxMs` passes. */
export function watch(t: ProbeTarget, path: string, o: Who & { until?: (events: WatchRead['events']) => boolean; maxMs?: number } = {}): Promise<WatchRead> {
  return new Promise((resolve, reject) => {
    const req = https.request(`${t.server}${path}`, { ca: t.caPem, agent: false, headers: authHeaders(t, o) }, (res) => {
      const out: WatchRead = { status: res.statusCode ?? 0, events: [], ended: false };
      let buf = '';
      const finish = (ended: boolean) => {
        clearTimeout(timer);
        out.ended = ended;
        if (out.status !== 200) out.body = buf;
        req.destroy();
        resolve(out);
      };
      const timer = setTimeout(() => finish(false), o.maxMs ?? 3000);
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        buf += c;
        if (out.status !== 200) return;
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.trim()) out.events.push(JSON.parse(line) as WatchRead['events'][number]);
        }
        if (o.until?.(out.events)) finish(false);
      });
      res.on('end', () => finish(true));
      res.on('error', () => finish(false));
    });
    req.on('error', reject);
    req.end();
  });
}

export interface WsFrame {
  opcode: number;
  payload: Buffer;
}

export interface WsSession {
  status: number;
  headers: IncomingHttpHeaders;
  /** Refusals: the body. */
  body: string;
  /** Every frame the server sent, in order (control frames included). */
  frames: WsFrame[];
  socket?: Duplex;
  send(opcode: number, payload: Buffer): void;
  /** Resolves when the server has closed (close frame, or the connection's end) or after maxMs. */
  closed(maxMs?: number): Promise<boolean>;
  /** Payload frames as they come, for byte-stream protocols (the SPDY tunnel). */
  onPayload?: (payload: Buffer) => void;
  destroy(): void;
}

function clientFrame(opcode: number, payload: Buffer): Buffer {
  const mask = randomBytes(4);
  const len = payload.length;
  const head = len < 126 ? Buffer.from([0x80 | opcode, 0x80 | len]) : Buffer.from([0x80 | opcode, 0x80 | 126, len >> 8, len & 255]);
  const body = Buffer.from(payload);
  for (let i = 0; i < body.length; i++) body[i]! ^= mask[i % 4]!;
  return Buffer.concat([head, mask, body]);
}

/**
 * A WebSocket upgrade offering `protocols` exactly as given (an empty list: no
 * Sec-WebSocket-Protocol header at all); the 101 or the refusal, then every frame.
 */
export function webSocket(t: ProbeTarget, path: string, protocols: string[], who: Who = {}): Promise<WsSession> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {
      ...authHeaders(t, who),
      Connection: 'Upgrade',
      Upgrade: 'websocket',
      'Sec-WebSocket-Version': '13',
      'Sec-WebSocket-Key': randomBytes(16).toString('base64'),
    };
    if (protocols.length) headers['Sec-WebSocket-Protocol'] = protocols.join(', ');
    const req = https.request(`${t.server}${path}`, { ca: t.caPem, agent: false, headers });
    const session = (status: number, h: IncomingHttpHeaders, body: string, socket?: Duplex): WsSession => {
      let gone = !socket;
      const waiters: Array<() => void> = [];
      const s: WsSession = {
        status,
        headers: h,
        body,
        frames: [],
        socket,
        send: (opcode, payload) => socket?.write(clientFrame(opcode, payload)),
        closed: (maxMs = 5000) =>
          gone
            ? Promise.resolve(true)
            : new Promise<boolean>((r) => {
                const timer = setTimeout(() => r(false), maxMs);
                waiters.push(() => {
                  clearTimeout(timer);
                  r(true);
                });
              }),
        destroy: () => socket?.destroy(),
      };
      const done = () => {
        gone = true;
        for (const w of waiters.splice(0)) w();
      };
      if (socket) {
        let buf = Buffer.alloc(0);
        socket.on('data', (c: Buffer) => {
          buf = Buffer.concat([buf, c]);
          for (;;) {
            if (buf.length < 2) return;
            let len = buf[1]! & 0x7f;
            let off = 2;
            if (len === 126) {
              if (buf.length < 4) return;
              len = buf.readUInt16BE(2);
              off = 4;
            } else if (len === 127) {
              if (buf.length < 10) return;
              len = Number(buf.readBigUInt64BE(2));
              off = 10;
            }
            if (buf.length < off + len) return;
            const frame = { opcode: buf[0]! & 0x0f, payload: buf.subarray(off, off + len) };
            buf = buf.subarray(off + len);
            s.frames.push(frame);
            if (frame.opcode === 2 && s.onPayload) s.onPayload(frame.payload);
            if (frame.opcode === 8) {
              socket.write(clientFrame(8, frame.payload.subarray(0, 2)));
              done();
            }
          }
        });
        socket.on('close', done);
        socket.on('error', () => {});
      }
      return s;
    };
    req.on('upgrade', (res, socket: Duplex, head: Buffer) => {
      const s = session(res.statusCode ?? 0, res.headers, '', socket);
      if (head.length) socket.unshift(head);
      resolve(s);
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(session(res.statusCode ?? 0, res.headers, Buffer.concat(chunks).toString('utf8'))));
    });
    req.on('error', reject);
    req.end();
  });
}

/** What happened on the streams of a SPDY session, in order: "error:reply", "data:fin", "error:text <…>", "data:rst 5". */
export class SpdyLog {
  readonly events: string[] = [];
  private waiters: Array<() => void> = [];

  constructor(readonly session: SpdySession) {}

  /** A port-forward pair as kubectl opens it: the error stream, then the data stream. */
  pair(port: string, requestId: string): { error: ReturnType<SpdySession['openStream']>; data: ReturnType<SpdySession['openStream']> } {
    const error = this.open('error', { streamtype: 'error', port, requestid: requestId });
    const data = this.open('data', { streamtype: 'data', port, requestid: requestId });
    return { error, data };
  }

  open(label: string, headers: Headers): ReturnType<SpdySession['openStream']> {
    const stream = this.session.openStream(headers);
    const note = (e: string) => {
      this.events.push(`${label}:${e}`);
      for (const w of this.waiters.splice(0)) w();
    };
    stream.onReply = () => note('reply');
    stream.onData = (d) => note(`bytes ${d.toString('utf8')}`);
    stream.onEnd = () => note('fin');
    stream.onReset = (status) => note(`rst ${status}`);
    return stream;
  }

  /** Waits until `pred` holds or maxMs passes (then returns what was seen). */
  async settle(pred: (events: string[]) => boolean, maxMs = 5000): Promise<string[]> {
    const deadline = Date.now() + maxMs;
    while (!pred(this.events) && Date.now() < deadline) {
      await new Promise<void>((r) => {
        const timer = setTimeout(r, Math.min(100, deadline - Date.now()));
        this.waiters.push(() => {
          clearTimeout(timer);
          r();
        });
      });
    }
    return [...this.events];
  }
}

/** The SPDY tunnel (subprotocol SPDY/3.1+portforward.k8s.io): the handshake, and a session on it when upgraded. */
export async function spdyTunnel(t: ProbeTarget, path: string, who: Who = {}): Promise<{ ws: WsSession; spdy?: SpdyLog }> {
  const ws = await webSocket(t, path, ['SPDY/3.1+portforward.k8s.io'], who);
  if (ws.status !== 101) return { ws };
  const session = new SpdySession('client', { write: (b) => ws.send(2, b), close: () => ws.destroy() });
  ws.onPayload = (p) => session.receive(p);
  for (const f of ws.frames) if (f.opcode === 2) session.receive(f.payload);
  return { ws, spdy: new SpdyLog(session) };
}
