// Small helpers for the simulator's own tests (plain https requests, watch streams, raw WebSocket
// port-forward sessions). Not a test file itself.
import https from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import { createInterface } from 'node:readline';
import WebSocket from 'ws';
import type { SimCluster } from './cluster.js';

export interface HttpResult {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  json(): any;
}

export interface RequestOpts {
  token?: string | null; // null = no Authorization header
  headers?: Record<string, string>;
  cert?: { certPem: string; keyPem: string };
  method?: string;
}

function options(sim: SimCluster, path: string, o: RequestOpts): https.RequestOptions {
  const url = new URL(sim.server + path);
  const headers: Record<string, string> = { ...(o.headers ?? {}) };
  const token = o.token === undefined ? sim.adminToken : o.token;
  if (token !== null) headers.Authorization = `Bearer ${token}`;
  return {
    hostname: url.hostname,
    port: url.port,
    path: url.pathname + url.search,
    method: o.method ?? 'GET',
    headers,
    ca: sim.caPem,
    cert: o.cert?.certPem,
    key: o.cert?.keyPem,
    agent: false,
  };
}

export function request(sim: SimCluster, path: string, o: RequestOpts = {}): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = https.request(options(sim, path, o), (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json: () => JSON.parse(body) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

export interface WatchEvent {
  type: string;
  object: any;
}

/** Opens a watch; events are queued; next() waits for the next one (or null when the stream ended). */
export class WatchStream {
  readonly events: WatchEvent[] = [];
  ended = false;
  status = 0;
  private waiters: Array<() => void> = [];
  private req?: ReturnType<typeof https.request>;

  static open(sim: SimCluster, path: string, o: RequestOpts = {}): Promise<WatchStream> {
    const w = new WatchStream();
    return new Promise((resolve, reject) => {
      w.req = https.request(options(sim, path, o), (res) => {
        w.status = res.statusCode ?? 0;
        const lines = createInterface({ input: res });
        lines.on('line', (l) => {
          if (l.trim()) {
            w.events.push(JSON.parse(l));
            w.wake();
          }
        });
        lines.on('close', () => {
          w.ended = true;
          w.wake();
        });
        lines.on('error', () => {
          w.ended = true;
          w.wake();
        });
        res.on('error', () => {
          w.ended = true;
          w.wake();
        });
        resolve(w);
      });
      w.req.on('error', (e) => {
        w.ended = true;
        w.wake();
        reject(e);
      });
      w.req.end();
    });
  }

  private wake(): void {
    for (const f of this.waiters.splice(0)) f();
  }

  async next(timeoutMs = 5000): Promise<WatchEvent | null> {
    const deadline = Date.now() + timeoutMs;
    while (this.events.length === 0 && !this.ended) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('timed out waiting for a watch event');
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    return this.events.shift() ?? null;
  }

  /** Waits until the server ends the stream. */
  async closed(timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.ended) {
      if (Date.now() > deadline) throw new Error('watch did not end');
      await new Promise<void>((r) => {
        const t = setTimeout(r, 50);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  close(): void {
    this.req?.destroy();
  }
}

export interface PfMessage {
  channel: number;
  data: Buffer;
  at: number;
}

/** A raw port-forward WebSocket with every message recorded (decoded for the base64 protocol). */
export class PfSocket {
  readonly messages: PfMessage[] = [];
  closeCode?: number;
  closedAt?: number;
  private readonly counts = new Map<number, number>();
  private waiters: Array<() => void> = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (d: Buffer, isBinary: boolean) => {
      if (this.base64) {
        if (isBinary) throw new Error('binary frame on the base64 protocol');
        const s = d.toString();
        this.messages.push({ channel: s.charCodeAt(0) - 48, data: Buffer.from(s.slice(1), 'base64'), at: Date.now() });
      } else {
        this.messages.push({ channel: d[0]!, data: d.subarray(1), at: Date.now() });
        this.counts.set(d[0]!, (this.counts.get(d[0]!) ?? 0) + d.length - 1);
      }
      this.wake();
    });
    ws.on('close', (code) => {
      this.closeCode = code;
      this.closedAt = Date.now();
      this.wake();
    });
    ws.on('error', () => {});
  }

  static open(sim: SimCluster, namespace: string, pod: string, query: string, protocols: string[] = ['v4.channel.k8s.io'], token?: string): Promise<PfSocket> {
    const url = `${sim.server.replace('https:', 'wss:')}/api/v1/namespaces/${namespace}/pods/${pod}/portforward?${query}`;
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, protocols, { ca: sim.caPem, headers: { Authorization: `Bearer ${token ?? sim.adminToken}` } });
      const s = new PfSocket(ws);
      ws.on('open', () => resolve(s));
      ws.on('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => {
          body += c;
        });
        res.on('end', () => reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode, body })));
      });
      ws.on('error', reject);
    });
  }

  get base64(): boolean {
    return this.ws.protocol === 'v4.base64.channel.k8s.io';
  }

  private wake(): void {
    for (const f of this.waiters.splice(0)) f();
  }

  send(channel: number, data: Buffer | string): void {
    const payload = Buffer.from(data);
    if (this.base64) this.ws.send(String.fromCharCode(48 + channel) + payload.toString('base64'));
    else this.ws.send(Buffer.concat([Buffer.from([channel]), payload]));
  }

  /** Waits until `pred` holds (re-checked on every message and on close). */
  async until(pred: () => boolean, timeoutMs = 5000, what = 'condition'): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pred()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  /** Number of bytes received so far on a channel (binary protocol only), prefix included. */
  count(channel: number): number {
    return this.counts.get(channel) ?? 0;
  }

  /** All bytes received on a channel, the 2-byte port prefix included. */
  channelBytes(channel: number): Buffer {
    return Buffer.concat(this.messages.filter((m) => m.channel === channel).map((m) => m.data));
  }

  waitClosed(timeoutMs = 5000): Promise<void> {
    return this.until(() => this.closeCode !== undefined, timeoutMs, 'WebSocket close');
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
