// Plain-HTTP forwarding for absolute-form requests (RFC 9112 §3.2.2), what `http_proxy=…`
// clients send for http:// URLs. The request is re-sent in origin form over a stream from the
// StreamOpener; hop-by-hop fields are dropped (RFC 9110 §7.6.1, http-messages.ts) and Node's http
// client re-frames the body. Upstream tunnels are pooled per host:port by a keep-alive http.Agent.
import http, { STATUS_CODES, type ClientRequest, type ClientRequestArgs, type IncomingMessage, type ServerResponse } from 'node:http';
import { pipeline, type Duplex } from 'node:stream';
import { BadRequestError, CommandNotSupportedError, NotAllowedError, OriginFailedError, ProxyError, errorMessage, withMessagePrefix } from '../core/errors.js';
import { destinationFor, formatHostPort, scopedIpv6Literal, unroutableIpMessage } from '../core/address.js';
import type { Logger } from '../core/log.js';
import { monotonicMs } from '../core/clock.js';
import type { Destination, StreamOpener, StreamSlot } from '../core/types.js';
import type { StreamRecord } from './stream-stats.js';
import type { ListenerContext } from './listener.js';
import { clientName, closingAfterAnswer, whenClientCloses } from './server-base.js';
import { pooledBusy, pooledIdle } from './idle-upstreams.js';
import { bodyFramingRefusal, earlyHintsFrom, endToEndHeaders, finalRecipientAnswer, maxForwardsFor } from './http-messages.js';
import { originFailure, originFormTarget, passTrailers, reasonWithMessage } from './http-messages.js';

/** Request options key carrying what createConnection needs to ask the opener. */
const META = 'proxyoutOpen';
interface OpenMeta {
  destination: Destination;
  client: string;
  signal: AbortSignal;
}

const noop = (): void => {};
const vias = new WeakMap<Duplex, string>();
const slots = new WeakMap<Duplex, StreamSlot>();
const routes = new WeakMap<Duplex, string>();
const transports = new WeakMap<Duplex, string>();
const stillRouted = new WeakMap<Duplex, () => boolean>();
/** When each upstream stream opened (monotonic ms). */
const openedAt = new WeakMap<Duplex, number>();
/** A pooled upstream takes requests this long after it opened (when RBAC was asked): not for good. */
export const UPSTREAM_REUSE_MS = 10_000;

/** What TunnelAgent uses of Node's Agent beyond @types/node. */
interface AgentInternals {
  freeSockets: Record<string, Duplex[] | undefined>;
  removeSocket(socket: Duplex, options: ClientRequestArgs): void;
}
const agentAddRequest = (http.Agent.prototype as unknown as { addRequest(request: ClientRequest, options: ClientRequestArgs): void }).addRequest;

/**
 * A keep-alive agent whose "connections" are streams from the opener. Idle tunnels are closed
 * after idleMs (or a second before the origin's Keep-Alive timeout hint), well before typical
 * server idle timeouts, to keep the reuse-vs-close race rare; the forwarder retries the rest.
 */
export class TunnelAgent extends http.Agent {
  constructor(
    private readonly opener: StreamOpener,
    private readonly log: Logger,
    private readonly idleMs = 4000,
    private readonly reuseMs = UPSTREAM_REUSE_MS,
  ) {
    super({ keepAlive: true, maxFreeSockets: 16, scheduling: 'lifo' });
  }

  override createConnection(options: ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): undefined {
    const meta = (options as Record<string, unknown>)[META] as OpenMeta;
    const cb = callback ?? noop;
    this.opener.open({ destination: meta.destination, frontEnd: 'http-forward', client: meta.client, signal: meta.signal }).then(
      (opened) => {
        const { stream, via, slot, route, transport } = opened;
        adaptStream(stream, this.log);
        vias.set(stream, via);
        if (slot) slots.set(stream, slot);
        if (route) routes.set(stream, route);
        if (transport) transports.set(stream, transport);
        if (opened.stillRouted) stillRouted.set(stream, opened.stillRouted);
        openedAt.set(stream, monotonicMs());
        cb(null, stream);
      },
      (err: unknown) => cb(err instanceof Error ? err : new Error(errorMessage(err)), undefined as unknown as Duplex),
    );
    return undefined;
  }

  /** Node's Agent.addRequest, which @types/node leaves out: stale pooled tunnels are dropped first. */
  addRequest(request: ClientRequest, options: ClientRequestArgs): void {
    // A pooled tunnel whose destination a reload (or a learnt ingress host) has sent elsewhere
    // since is not reused: the next request is routed anew, as a new client's would be.
    const internals = this as unknown as AgentInternals;
    for (const socket of [...(internals.freeSockets[this.getName(options)] ?? [])]) {
      if (!this.stale(socket)) continue;
      pooledBusy(socket);
      socket.destroy();
      internals.removeSocket(socket, options); // out of the pool now, not at its 'close'
    }
    agentAddRequest.call(this, request, options);
  }

  /** Routed elsewhere since, or opened (authorized) too long ago: a new request opens anew. */
  private stale(socket: Duplex): boolean {
    return stillRouted.get(socket)?.() === false || monotonicMs() - (openedAt.get(socket) ?? 0) > this.reuseMs;
  }

  override keepSocketAlive(socket: Duplex): boolean {
    if (this.stale(socket)) return false;
    let idle = this.idleMs;
    const res = (socket as { _httpMessage?: { res?: IncomingMessage } })._httpMessage?.res;
    const hint = /^timeout=(\d+)/.exec(String(res?.headers['keep-alive'] ?? ''))?.[1];
    if (hint !== undefined) idle = Math.min(idle, Number(hint) * 1000 - 1000);
    if (idle <= 0) return false;
    // Idle in the pool, no client holds it: it must not count against --max-streams.
    slots.get(socket)?.release();
    pooledIdle(socket, idle);
    return true;
  }

  override reuseSocket(socket: Duplex, request: ClientRequest): void {
    pooledBusy(socket);
    slots.get(socket)?.retake();
    super.reuseSocket(socket, request);
  }
}

/** Makes a plain Duplex acceptable to http.Agent/ClientRequest, which expect a net.Socket. */
function adaptStream(stream: Duplex, log: Logger): void {
  const s = stream as unknown as Record<string, unknown>;
  for (const name of ['setKeepAlive', 'setNoDelay', 'setTimeout', 'ref', 'unref']) {
    if (typeof s[name] !== 'function')
      s[name] = function (this: Duplex) {
        return this;
      };
  }
  // The pool must never hold an upstream error unhandled between requests.
  stream.on('error', (err) => log.debug({ err: errorMessage(err) }, 'http-forward upstream stream error'));
  // Once the origin has closed its side the tunnel is useless; destroying it (after the http
  // client has seen the 'end') drops it from the pool, as a net.Socket would close itself.
  stream.on('end', () => setImmediate(() => stream.destroy()));
}

const RETRYABLE = new Set(['ECONNRESET', 'EPIPE', 'ERR_STREAM_PREMATURE_CLOSE', 'ERR_STREAM_DESTROYED']);

/**
 * Largest response head taken from an origin. Node's default (16 KiB) is below what sites send
 * (cookies, CSP) and below the 32 KiB we take from clients; 64 KiB is about Envoy's default.
 */
const MAX_RESPONSE_HEAD = 64 * 1024;

/** Methods a proxy may send again on its own: the idempotent ones (RFC 9110 §9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

function sendText(res: ServerResponse, status: number, body: string, close = false): void {
  if (res.headersSent || res.destroyed) return void res.destroy();
  res.writeHead(status, reasonWithMessage(status, body), {
    'Content-Type': 'text/plain; charset=utf-8',
    // Our error bodies quote client text (escaped); a browser must never sniff them into HTML.
    'X-Content-Type-Options': 'nosniff',
    'Content-Length': Buffer.byteLength(body),
    ...(close ? { Connection: 'close' } : {}),
  });
  res.end(body);
}

/** Returns the 'request' handler of the HTTP listener. */
export function createForwarder(ctx: ListenerContext, agent: TunnelAgent): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const client = clientName(req.socket);
    const fail = (err: unknown, destination?: Destination, close = false): void => {
      // Requests parsed behind an answer saying close are not acted on (RFC 9112 §9.6, http-server.ts).
      if (close) closingAfterAnswer.add(req.socket);
      const reply = ctx.stats.failed('http-forward', client, destination, err);
      sendText(res, reply.http, `kubectl-proxyout: ${reply.message}\n`, close);
    };
    const url = req.url ?? '';
    if (!/^http:\/\//i.test(url)) {
      if (/^https:\/\//i.test(url))
        return fail(new BadRequestError('https:// URLs must be tunnelled with CONNECT (https_proxy / curl -p), not sent in absolute form'));
      if (url.startsWith('/') || url === '*') {
        // Quoted into the log line too: no query (it may carry a token), and a bounded Host.
        const host = (req.headers.host ?? 'HOST:PORT').slice(0, 261);
        return fail(
          new BadRequestError(
            `this is kubectl-proxyout, an HTTP proxy: send absolute-form requests (http_proxy=http://${host}) or CONNECT; "${req.method} ${url.split('?')[0]!.slice(0, 100)}" is not a proxy request`,
          ),
        );
      }
      return fail(new BadRequestError('only http:// URLs can be forwarded'));
    }
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      const scoped = scopedIpv6Literal(url);
      return fail(scoped ? new NotAllowedError(unroutableIpMessage(scoped)) : new BadRequestError('malformed request URL'));
    }
    const port = target.port === '' ? 80 : Number(target.port);
    if (target.hostname === '' || port === 0) return fail(new BadRequestError('request URL has no usable host or port'));
    const destination = destinationFor(target.hostname, port);
    // Upgrade is an offer a recipient may decline (RFC 9110 §7.8): h2c, which `curl --http2` and
    // git's http.version=HTTP/2 offer on every http:// URL, is declined by forwarding the request
    // without it (Upgrade is hop-by-hop) and answering in HTTP/1.1. A WebSocket client fails
    // without its 101, which only a tunnel can carry: it is told to use CONNECT.
    if (/(?:^|,)\s*websocket\s*(?:\/|,|$)/i.test(String(req.headers.upgrade ?? ''))) {
      return fail(new CommandNotSupportedError('WebSocket upgrades through a plain-HTTP proxy are not supported; use CONNECT'), destination, true);
    }
    const refused = bodyFramingRefusal(req.httpVersion, req.headers['transfer-encoding']);
    if (refused) return fail(refused, destination, true);
    forward(ctx, agent, req, res, client, destination, target, fail);
  };
}

function forward(
  ctx: ListenerContext,
  agent: TunnelAgent,
  req: IncomingMessage,
  res: ServerResponse,
  client: string,
  destination: Destination,
  target: URL,
  fail: (err: unknown, destination?: Destination, close?: boolean) => void,
): void {
  const path = originFormTarget(req.url!, req.method);
  const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  const maxForwards = req.headers['max-forwards'];
  const hops = maxForwardsFor(req.method, typeof maxForwards === 'string' ? maxForwards : undefined);
  if (hops.answerHere) {
    const { headers, body } = finalRecipientAnswer(req);
    res.writeHead(200, headers);
    res.end(body);
    return;
  }
  const headers = [
    'Host',
    target.host,
    ...endToEndHeaders(req.rawHeaders, ['host', 'expect', 'content-length', ...(hops.forwardAs === undefined ? [] : ['max-forwards'])]),
  ];
  if (hops.forwardAs !== undefined) headers.push('Max-Forwards', hops.forwardAs);
  // The one expectation HTTP defines goes on to the origin, whose 100 reaches the client below
  // (as Node matches it; never for HTTP/1.0 clients, which must not get a 1xx: RFC 9110 §15.2).
  const expectsContinue = hasBody && req.httpVersion !== '1.0' && /(?:^|\W)100-continue(?:$|\W)/i.test(req.headers.expect ?? '');
  if (expectsContinue) headers.push('Expect', '100-continue');
  // The body is always re-framed from what Node's parser read, never from the client's text:
  // chunked if it came chunked (Node de-chunks it; declaring chunked makes the client re-frame
  // it), else the parsed Content-Length. Nothing else may frame it (see NEVER_CONNECTION_OPTIONS).
  if (req.headers['transfer-encoding'] !== undefined) headers.push('Transfer-Encoding', 'chunked');
  else if (req.headers['content-length'] !== undefined) headers.push('Content-Length', req.headers['content-length']);
  const abort = new AbortController();
  // Counted as they flow; status reads them while the answer is on its way (StreamRecord.live).
  const bytes = { bytesFromClient: 0, bytesToClient: 0 };
  let record: StreamRecord | undefined;
  let current: ClientRequest | undefined;
  // The client left before its answer was sent: the request is abandoned, and its tunnel with it.
  // Node closes only the response being written; one queued behind it on a pipelined connection
  // never closes, and its tunnel would stay open (and count against --max-streams) for ever.
  const clientGone = (): void => {
    if (res.writableFinished || abort.signal.aborted) return;
    abort.abort(new Error('client disconnected'));
    current?.destroy();
    res.destroy();
    // An answer queued behind another's has no socket: destroying it ends nothing, and its
    // pipeline would never call back to close the record.
    if (record) ctx.stats.closed(record, bytes.bytesFromClient, bytes.bytesToClient, new Error('client disconnected'));
  };
  const forget = whenClientCloses(req.socket, clientGone);
  res.once('close', () => {
    forget();
    clientGone();
  });
  if (hasBody) req.on('data', (chunk: Buffer) => (bytes.bytesFromClient += chunk.length));

  const attempt = (first: boolean): void => {
    let upReq: ClientRequest;
    try {
      upReq = http.request({
        agent,
        host: destination.host,
        port: destination.port,
        method: req.method,
        path,
        headers,
        maxHeaderSize: MAX_RESPONSE_HEAD,
        [META]: { destination, client, signal: abort.signal },
      } as ClientRequestArgs);
    } catch (err) {
      return fail(new BadRequestError(`cannot forward this request: ${errorMessage(err)}`), destination);
    }
    current = upReq;
    let answered = false;
    let response: IncomingMessage | undefined;
    let continued = false;
    if (expectsContinue) {
      upReq.on('continue', () => {
        continued = true;
        if (!res.headersSent) res.writeContinue();
      });
    }
    // Other 1xx answers a proxy must pass on (RFC 9110 §15.2), to HTTP/1.1 clients only.
    upReq.on('information', (info: { statusCode: number; rawHeaders: string[] }) => {
      if (res.headersSent || req.httpVersion === '1.0') return;
      try {
        if (info.statusCode === 102) res.writeProcessing();
        const hints = info.statusCode === 103 ? earlyHintsFrom(info.rawHeaders) : undefined;
        if (hints) res.writeEarlyHints(hints);
      } catch (err) {
        ctx.log.debug({ err: errorMessage(err), status: info.statusCode }, 'an interim response from the origin could not be passed on');
      }
    });
    // Where the request went once its stream opened, for a failure's message: route and pod.
    let where: string | undefined;
    let onRoute = '';
    upReq.on('socket', (socket: Duplex) => {
      const via = vias.get(socket) ?? 'unknown';
      const route = routes.get(socket);
      onRoute = route === undefined ? '' : `route ${route}: `;
      where = `${onRoute}${formatHostPort(destination.host, destination.port)} via ${via}`;
      record = ctx.stats.opened('http-forward', client, destination, via, route, transports.get(socket));
      record.live = bytes;
    });
    const onUpstreamError = (err: NodeJS.ErrnoException): void => {
      if (res.destroyed || abort.signal.aborted) {
        if (record) ctx.stats.closed(record, bytes.bytesFromClient, bytes.bytesToClient, err);
        return;
      }
      // The answer was whole and the origin sent on after it (a body on a HEAD or 204 answer, as
      // some servers do): the client has its answer, it goes out; only the tunnel is lost.
      if (response?.complete) {
        ctx.log.debug({ err: errorMessage(err), client }, 'the origin sent bytes after a complete answer; its tunnel is closed');
        return;
      }
      if (record) {
        ctx.stats.closed(record, bytes.bytesFromClient, bytes.bytesToClient, err);
        record = undefined;
        // A pooled tunnel the origin closed just as we reused it: an idempotent request without a
        // body is sent once more on a fresh one — never after its answer began (a reset then
        // reaches the request too), and never a POST, which the origin may have acted on.
        const again = first && upReq.reusedSocket && !hasBody && !answered && IDEMPOTENT.has(req.method ?? '');
        // So does the transport's failure (the pod was deleted), and bytes that are no answer (a body
        // the origin sent late after its last one, on a HEAD or a 204: they come before this answer).
        if (again && (RETRYABLE.has(err.code ?? '') || err instanceof ProxyError || err.code?.startsWith('HPE_'))) return attempt(false);
      }
      if (hasBody) {
        // The rest of the body is read and dropped while the answer goes out and the connection
        // closes in stages (http-server.ts lingeringClose): a client sending all of it before
        // reading still gets the answer.
        req.unpipe(upReq);
        req.resume();
      }
      // An open failure names its route (the router's prefix), a broken tunnel only its pod.
      const failure =
        where === undefined
          ? err
          : err instanceof ProxyError
            ? withMessagePrefix(err, onRoute)
            : new OriginFailedError(`${where}: ${originFailure(err, `${MAX_RESPONSE_HEAD / 1024} KiB`, destination)}`, { cause: err });
      fail(failure, destination, hasBody);
    };
    upReq.on('error', onUpstreamError);
    // The origin answered an upload early and closed (nginx's 413): the rest is read and dropped,
    // or a client sending all of it before reading (Python's) waits for ever.
    upReq.once('close', () => hasBody && !req.complete && response?.complete && req.unpipe(upReq).resume());
    // A 101 nobody asked for (Upgrade is never forwarded): without a listener Node's client drops
    // the tunnel with neither 'response' nor 'error', and the client would wait for ever.
    upReq.on('upgrade', (_upRes: IncomingMessage, socket: Duplex) => {
      socket.destroy();
      onUpstreamError(Object.assign(new Error('the origin switched protocols (101) though no upgrade was asked for'), { code: 'EPROTO' }));
    });
    upReq.on('response', (upRes: IncomingMessage) => {
      answered = true;
      response = upRes;
      const rec = record;
      const status = upRes.statusCode ?? 502;
      try {
        res.writeHead(status, upRes.statusMessage || STATUS_CODES[status] || '', endToEndHeaders(upRes.rawHeaders));
      } catch {
        // Node re-validates what it writes; an origin head it refuses becomes our 502.
        upRes.destroy();
        if (rec) ctx.stats.closed(rec, bytes.bytesFromClient, 0, new Error('unforwardable response head'));
        return sendText(res, 502, 'kubectl-proxyout: the origin sent a response head that cannot be forwarded\n', true);
      }
      upRes.on('data', (chunk: Buffer) => (bytes.bytesToClient += chunk.length));
      // Trailer fields go on at the body's end, before pipeline ends the answer (Node drops them where it cannot send them).
      upRes.once('end', () => passTrailers(res, upRes.rawTrailers));
      // pipeline gives backpressure and tears down the other side if either fails.
      pipeline(upRes, res, (err) => {
        if (rec) ctx.stats.closed(rec, bytes.bytesFromClient, bytes.bytesToClient, err ?? undefined);
        // A 100-continue upload the origin refused (a final status without 100): the body is not
        // coming, and a tunnel waiting for it serves nobody. Whatever the client sends anyway
        // (after its own wait) is read and dropped, as Node does for an unread request body.
        if (expectsContinue && !continued && !upReq.writableFinished) {
          req.unpipe(upReq);
          req.resume();
          upReq.destroy();
        }
      });
    });
    if (hasBody) req.once('end', () => passTrailers(upReq, req.rawTrailers)).pipe(upReq);
    else upReq.end();
  };
  attempt(true);
}
