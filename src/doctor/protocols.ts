// Which port-forward protocols the API server offers for one pod, asked the way the proxy and
// kubectl ask (an upgrade request each, closed as soon as it is answered; no stream is opened):
//   tunnel     WebSocket, subprotocol SPDY/3.1+portforward.k8s.io (client-go tunneling_dialer.go; ≥ 1.30)
//   websocket  WebSocket, subprotocol v4.channel.k8s.io with ?ports= (kubelet portforward/websocket.go)
//   spdy       plain HTTP Upgrade: SPDY/3.1, X-Stream-Protocol-Version: portforward.k8s.io (the legacy dialer)
// The proxy uses the first two (src/tunnel/negotiate.ts); plain SPDY is reported for completeness.
import http from 'node:http';
import https from 'node:https';
import WebSocket from 'ws';
import type { ApiConnection } from '../cluster/api.js';
import { untilSocket } from '../cluster/socket-wait.js';
import { htmlPageMessage } from '../cluster/foreign-answer.js';
import { TUNNEL_PROTOCOL, dialTunnel } from '../tunnel/spdy/tunnel.js';
import { V4_PROTOCOL } from '../tunnel/websocket-v4.js';
import { webSocketOptions } from '../tunnel/ws-options.js';
import { errorMessage } from '../core/errors.js';

export type ProtocolName = 'tunnel' | 'websocket' | 'spdy';

export interface ProtocolAnswer {
  protocol: ProtocolName;
  offered: boolean;
  /** "101 SPDY/3.1+portforward.k8s.io", "HTTP 400: …", or the network error. */
  answer: string;
  /** HTTP status of a refusal (0 for a network error or success). */
  status: number;
}

export const PROTOCOL_LABELS: Record<ProtocolName, string> = {
  tunnel: 'SPDY over WebSocket',
  websocket: 'per-stream WebSocket v4',
  spdy: 'legacy SPDY',
};

export async function probeProtocols(api: ApiConnection, pod: { namespace: string; name: string; port: number }, timeoutMs: number): Promise<ProtocolAnswer[]> {
  const base = `/api/v1/namespaces/${encodeURIComponent(pod.namespace)}/pods/${encodeURIComponent(pod.name)}/portforward`;
  const conn = await api.requestOptions();
  return Promise.all([
    probeTunnel(api, conn, base, timeoutMs),
    probeV4(api, conn, `${base}?ports=${pod.port}`, timeoutMs),
    probeSpdy(api, conn, base, timeoutMs),
  ]);
}

type Conn = Awaited<ReturnType<ApiConnection['requestOptions']>>;

async function probeTunnel(api: ApiConnection, conn: Conn, path: string, timeoutMs: number): Promise<ProtocolAnswer> {
  try {
    const ws = await dialTunnel(api.url(path, 'ws'), conn, timeoutMs);
    ws.terminate();
    return { protocol: 'tunnel', offered: true, answer: `101 ${TUNNEL_PROTOCOL}`, status: 0 };
  } catch (err) {
    const status = (err as { status?: number }).status ?? 0;
    return { protocol: 'tunnel', offered: false, answer: errorMessage(err), status: status === 101 ? 0 : status };
  }
}

function probeV4(api: ApiConnection, conn: Conn, path: string, timeoutMs: number): Promise<ProtocolAnswer> {
  const url = api.url(path, 'ws');
  return new Promise((resolve) => {
    const ws = new WebSocket(url, [V4_PROTOCOL], webSocketOptions(url, conn, { handshakeTimeout: timeoutMs }));
    const done = (a: Omit<ProtocolAnswer, 'protocol'>) => {
      ws.removeAllListeners();
      ws.on('error', () => undefined);
      ws.terminate();
      resolve({ protocol: 'websocket', ...a });
    };
    ws.once('open', () => done({ offered: ws.protocol === V4_PROTOCOL, answer: `101 ${ws.protocol || '(no subprotocol)'}`, status: 0 }));
    ws.once('unexpected-response', (_req, res) => refusal(res, (a) => done(a)));
    ws.once('error', (err) => done({ offered: false, answer: errorMessage(err), status: 0 }));
  });
}

function probeSpdy(api: ApiConnection, conn: Conn, path: string, timeoutMs: number): Promise<ProtocolAnswer> {
  const url = api.url(path);
  const client = url.protocol === 'http:' ? http : https;
  return new Promise((resolve) => {
    let settled = false;
    const done = (a: Omit<ProtocolAnswer, 'protocol'>) => {
      if (settled) return;
      settled = true;
      req.destroy();
      resolve({ protocol: 'spdy', ...a });
    };
    const req = client.request(url, {
      ...conn,
      method: 'POST',
      headers: { ...conn.headers, Connection: 'Upgrade', Upgrade: 'SPDY/3.1', 'X-Stream-Protocol-Version': 'portforward.k8s.io' },
    });
    const late = () => done({ offered: false, answer: `no answer within ${timeoutMs} ms`, status: 0 });
    req.setTimeout(timeoutMs, late);
    untilSocket(req, timeoutMs, late);
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      const upgrade = String(res.headers.upgrade ?? '');
      const version = String(res.headers['x-stream-protocol-version'] ?? '');
      // kubectl's SPDY dialer takes only the protocol it asked for (client-go portforward.go:
      // "unable to negotiate protocol").
      const offered = /^SPDY\/3\.1$/i.test(upgrade) && version === 'portforward.k8s.io';
      const answer = `101 ${upgrade} ${version || '(no X-Stream-Protocol-Version)'}`;
      done({ offered, answer, status: 0 });
    });
    req.on('response', (res) => refusal(res, done));
    req.on('error', (err) => done({ offered: false, answer: errorMessage(err), status: 0 }));
    req.end();
  });
}

/** The most of a refusal's body read: its start says what it is. */
const REFUSAL_CHARS = 2000;

/**
 * A refused upgrade's answer from the start of its body: at its end, or once REFUSAL_CHARS are in
 * (a body that never ends, whose every chunk was kept, held the doctor for ever).
 */
function refusal(res: http.IncomingMessage, done: (a: Omit<ProtocolAnswer, 'protocol'>) => void): void {
  const status = res.statusCode ?? 0;
  let body = '';
  let said = false;
  const answer = () => {
    if (said) return;
    said = true;
    done({ offered: false, answer: `HTTP ${status}${firstLine(body.slice(0, REFUSAL_CHARS))}`, status });
  };
  res.setEncoding('utf8').on('data', (c: string) => {
    body += c;
    if (body.length < REFUSAL_CHARS) return;
    res.destroy();
    answer();
  });
  res.on('end', answer);
  res.on('error', answer);
}

function firstLine(body: string): string {
  // A front's page (an ingress that passes WebSockets only) is named, not shown as `<!DOCTYPE html>`.
  const page = htmlPageMessage(body);
  if (page) return `: ${page}`;
  let text = body;
  try {
    const obj = JSON.parse(body) as { message?: string };
    if (typeof obj.message === 'string') text = obj.message;
  } catch {
    /* plain text */
  }
  const line = text.trim().split('\n')[0]?.slice(0, 200) ?? '';
  return line ? `: ${line}` : '';
}
