// The HTTP proxy front end: CONNECT tunnels (RFC 9110 §9.3.6) and absolute-form forwarding of
// plain http:// requests (RFC 9112 §3.2.2, see http-forward.ts). Node's http server does the
// parsing, keep-alive and hostile-input handling; this module adds the limits and the proxying.
import http, { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import { BadRequestError, CommandNotSupportedError, NotAllowedError } from '../core/errors.js';
import { authorityProblem, formatHostPort, parseConnectTarget, scopedIpv6Literal, unroutableIpMessage } from '../core/address.js';
import type { Listener, ListenerContext } from './listener.js';
import { startRelay } from './relay.js';
import {
  CLIENT_SOCKET_HIGH_WATER,
  ClientTracker,
  clientName,
  closeServer,
  closingAfterAnswer,
  endWithReply,
  openHeld,
  listenOn,
  type UnixListen,
} from './server-base.js';
import { TunnelAgent, createForwarder } from './http-forward.js';
import { authorizeConnect, requireProxyAuth } from './http-auth.js';
import { UnauthenticatedConnections } from './unauthenticated.js';
import { isPacRequest, servePac } from './pac-file.js';
import { reasonWithMessage } from './http-messages.js';
import { SocksMethod, encodeMethodSelection, encodeSocks4Reply } from './socks-protocol.js';

/** Request heads larger than this get 431; generous for cookies, small enough to bound memory. */
export const MAX_HEADER_SIZE = 32 * 1024;
/** Idle time allowed between requests on a client keep-alive connection. */
export const CLIENT_KEEP_ALIVE_MS = 30_000;
/** A closing connection reads and drops what the client still sends for this long at most… */
export const LINGER_MS = 30_000;
/** …and gives up sooner when the client sends nothing for this long (nginx's lingering defaults). */
export const LINGER_IDLE_MS = 5_000;

export interface HttpListenerOptions {
  /** Idle upstream tunnels kept for reuse are closed after this long (ms). */
  upstreamIdleMs?: number;
  /** Pooled upstream tunnels take new requests this long after they opened (ms). */
  upstreamReuseMs?: number;
  /** With authentication on: connections not yet authenticated per source (listeners/unauthenticated.ts). */
  maxUnauthenticatedPerSource?: number;
}

export async function startHttpListener(host: string | UnixListen, port: number, ctx: ListenerContext, options: HttpListenerOptions = {}): Promise<Listener> {
  const tracker = new ClientTracker(ctx.log, ctx.connections);
  const agent = new TunnelAgent(ctx.opener, ctx.log, options.upstreamIdleMs, options.upstreamReuseMs);
  const server = http.createServer({
    maxHeaderSize: MAX_HEADER_SIZE,
    headersTimeout: ctx.handshakeTimeoutMs,
    // No deadline for the whole request: bodies are streamed upstream and uploads can be long.
    // The head is bounded by headersTimeout; a stalled upload stalls only its own tunnel.
    requestTimeout: 0,
    keepAliveTimeout: CLIENT_KEEP_ALIVE_MS,
    // Node checks header deadlines on this interval (default 30 s); make them bite on time.
    connectionsCheckingInterval: Math.max(25, Math.min(1000, Math.floor(ctx.handshakeTimeoutMs / 4))),
    // Absolute-form requests carry the authority in the URL; do not insist on Host.
    requireHostHeader: false,
    highWaterMark: CLIENT_SOCKET_HIGH_WATER,
  });
  const unauthenticated = ctx.auth ? new UnauthenticatedConnections(ctx.log, options.maxUnauthenticatedPerSource) : undefined;
  server.on('connection', (socket: net.Socket) => {
    if (!tracker.add(socket)) return;
    unauthenticated?.admit(socket);
    (socket as { destroySoon?: () => void }).destroySoon = lingeringClose;
  });
  const proxied = requireProxyAuth(ctx, createForwarder(ctx, agent), unauthenticated);
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    // A request that arrives on a connection closing after a `Connection: close` answer (Node's
    // parser reads on while we linger): no answer can reach the client any more, so it is not
    // acted on — only its body is dropped.
    if (req.socket.writableEnded || closingAfterAnswer.has(req.socket)) {
      req.resume();
      return;
    }
    // Browsers fetch the PAC file directly: who may have it is pac-file.ts's decision (by peer address).
    if (ctx.pac && isPacRequest(req))
      return servePac(req, res, ctx.pac, ctx.auth, (err, level) => ctx.stats.failed('http-forward', clientName(req.socket), undefined, err, level));
    // The live page decides its own access too (ui/page-access.ts): this machine only, with its token.
    if (ctx.page?.claims(req)) return ctx.page.serve(req, res);
    proxied(req, res);
  };
  server.on('request', onRequest);
  // Expect: 100-continue: Node would send 100 at once for every such request, before proxy
  // authentication and routing have had their say. Handled as any request instead: a refusal is
  // the final status before the body; otherwise the origin's own 100 is passed on
  // (http-forward.ts). RFC 9110 §10.1.1.
  server.on('checkContinue', onRequest);
  server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    handleConnect(ctx, req, socket as net.Socket, head, unauthenticated).catch((err: unknown) => {
      ctx.log.error({ err }, 'HTTP CONNECT failed unexpectedly');
      socket.destroy();
    });
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => answerClientError(ctx, err, socket as net.Socket));
  const address = await listenOn(server, host, port, 'HTTP proxy', { flag: '--listen-http', hasCredentials: ctx.auth !== undefined });
  server.on('error', (err) => ctx.log.error({ err }, 'HTTP listener error'));
  return {
    kind: 'http',
    address,
    connections: () => tracker.size,
    close: async (graceMs: number) => {
      // Keep-alive connections that go idle during the grace period are closed as they do.
      await closeServer(server, tracker, graceMs, () => server.closeIdleConnections());
      agent.destroy();
    },
  };
}

/**
 * Closes after a response that said `Connection: close` (Node's http server calls the socket's
 * destroySoon then, lib/_http_server.js resOnFinish). Node's own closes the descriptor as soon as
 * the response is flushed; a client still sending a request body we refused (a 407, a 502 to an
 * upload) then meets a RST, which also throws away the response it has not read yet — clients
 * that send the whole body before reading, as Python's http.client does, never see the answer.
 * So this closes in stages (RFC 9112 §9.6): FIN after the response, then read on until the
 * client closes, or it has been quiet LINGER_IDLE_MS, or LINGER_MS have passed. What it sends
 * meanwhile is the refused body, which the parser drops (a request body left flowing: Node's
 * _dump for an unread one, http-forward.ts for one it stopped forwarding).
 */
function lingeringClose(this: net.Socket): void {
  if (this.destroyed) return;
  if (this.writable) this.end();
  this.setTimeout(LINGER_IDLE_MS, () => this.destroy());
  const deadline = setTimeout(() => this.destroy(), LINGER_MS);
  deadline.unref();
  this.once('close', () => clearTimeout(deadline));
  // The client's FIN ends it, once our response and FIN are out.
  this.once('end', () => (this.writableFinished ? this.destroy() : this.once('finish', () => this.destroy())));
}

/**
 * A complete, self-contained error response on a raw socket, then a graceful close. `explain`:
 * the body's text goes into the reason phrase too (http-messages.ts reasonWithMessage).
 */
export function rawErrorResponse(status: number, body: string, extraHeaders: readonly string[] = [], explain = false): string {
  const text = body.endsWith('\n') ? body : `${body}\n`;
  return (
    `HTTP/1.1 ${status} ${explain ? reasonWithMessage(status, body) : (STATUS_CODES[status] ?? 'Error')}\r\n` +
    extraHeaders.map((h) => `${h}\r\n`).join('') +
    'Content-Type: text/plain; charset=utf-8\r\n' +
    'X-Content-Type-Options: nosniff\r\n' +
    `Content-Length: ${Buffer.byteLength(text)}\r\n` +
    'Connection: close\r\n\r\n' +
    text
  );
}

/** A request line with a method token, as RFC 9110 §9.1 allows any, in HTTP/1.x. */
const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}) [^\s]+ HTTP\/1\.[01]\r?\n/;

/** The method of the request line the parser stopped in (`at`: where), if it is one. */
function unknownMethod(packet: Buffer, at: number): string | undefined {
  const start = packet.lastIndexOf(0x0a, Math.max(0, at - 1)) + 1;
  return REQUEST_LINE.exec(packet.toString('latin1', start, start + 8192))?.[1];
}

/** Connections whose malformed request is being answered: a later parser error or timeout is not. */
const answeringClientError = new WeakSet<net.Socket>();

function answerClientError(ctx: ListenerContext, err: NodeJS.ErrnoException, socket: net.Socket): void {
  ctx.log.debug({ code: err.code }, `HTTP client error: ${err.message}`);
  if (answeringClientError.has(socket)) return;
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  // A SOCKS client pointed at this port (ALL_PROXY=socks5h://…:3128): refused in its own
  // protocol, and said in the log, where it was a debug line only.
  const packet = (err as { rawPacket?: Buffer }).rawPacket;
  const version = packet?.[0];
  const here = socket.localPort === undefined ? 'HOST:PORT' : formatHostPort(socket.localAddress ?? '127.0.0.1', socket.localPort);
  if (err.code === 'HPE_INVALID_METHOD' && (version === 4 || version === 5) && socket.bytesRead === packet!.length) {
    const why = `a SOCKS${version} client reached the HTTP proxy listener: use http://${here} as an HTTP proxy, or a SOCKS listener (--listen-socks)`;
    ctx.stats.failed('http-forward', clientName(socket), undefined, new BadRequestError(why));
    endWithReply(socket, version === 5 ? encodeMethodSelection(SocksMethod.noAcceptable) : encodeSocks4Reply(false));
    return;
  }
  // A TLS ClientHello (HTTPS_PROXY=https://…): the 400 below is what the client calls "wrong
  // version number"; the log says why, where it said nothing.
  if (err.code === 'HPE_INVALID_METHOD' && version === 0x16 && packet![1] === 0x03) {
    const why = `a TLS client reached the HTTP proxy listener, which speaks plain HTTP: use http://${here} as the proxy URL, not https://`;
    ctx.stats.failed('http-forward', clientName(socket), undefined, new BadRequestError(why));
  }
  // A well-formed request whose method Node's parser does not know (Varnish's BAN, a custom one):
  // it cannot be forwarded, which is 501 (RFC 9110 §9.1), not "malformed".
  const method = err.code === 'HPE_INVALID_METHOD' && packet ? unknownMethod(packet, (err as { bytesParsed?: number }).bytesParsed ?? 0) : undefined;
  const unsupported =
    method === undefined
      ? undefined
      : ctx.stats.failed(
          'http-forward',
          clientName(socket),
          undefined,
          new CommandNotSupportedError(`method ${method} is not supported: the proxy's HTTP parser (Node's) does not know it`),
        );
  const [status, body] = unsupported
    ? [unsupported.http, unsupported.message]
    : err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, `request head larger than ${MAX_HEADER_SIZE} bytes`]
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request head not received in time']
        : [400, 'malformed HTTP request'];
  answeringClientError.add(socket);
  // Nothing more is parsed; what the client still sends is read and dropped (endWithReply).
  socket.removeAllListeners('data');
  socket.on('data', () => undefined);
  earlierResponsesSent(socket).then(
    (answer) => {
      if (!answer) socket.destroy();
      // An earlier answer said Connection: close and is closing it (lingeringClose): nothing to add.
      else if (!socket.writableEnded) endWithReply(socket, rawErrorResponse(status, `kubectl-proxyout: ${body}`, [], true));
    },
    () => socket.destroy(),
  );
}

/**
 * Waits until every response to requests pipelined before this one (a CONNECT, a malformed
 * request) is written. Responses go in request order (RFC 9112 §9.3.2), but Node hands us the
 * CONNECT's socket, or the parser's error, as soon as it parses it: a 200, 407 or 400 written at
 * once would overtake (or, with its close, cut off) an earlier answer. Node keeps the response
 * being written on `socket._httpMessage` and assigns the next queued one when it finishes.
 * Resolves false when nothing more can be written: the socket is gone, or the malformed bytes are
 * the body of the request whose answer has begun (a bad chunk size).
 */
async function earlierResponsesSent(socket: net.Socket): Promise<boolean> {
  for (;;) {
    const pending = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
    if (!pending || socket.destroyed) return !socket.destroyed;
    // Its request was not read whole: what failed to parse is its body.
    if (!pending.req.complete) return !pending.headersSent;
    if (!pending.writableFinished && !pending.destroyed) {
      await new Promise<void>((resolve) => {
        pending.once('finish', resolve);
        pending.once('close', resolve);
      });
    }
    // Let Node detach the finished response and assign the next queued one, if any.
    await new Promise((resolve) => setImmediate(resolve));
    if ((socket as { _httpMessage?: unknown })._httpMessage === pending) return !socket.destroyed;
  }
}

async function handleConnect(
  ctx: ListenerContext,
  req: IncomingMessage,
  socket: net.Socket,
  head: Buffer,
  unauthenticated?: UnauthenticatedConnections,
): Promise<void> {
  const client = clientName(socket);
  await earlierResponsesSent(socket);
  // An earlier response may have closed the connection (Connection: close): nothing to answer.
  if (socket.destroyed || socket.writableEnded) return;
  // The tunnel is ours now: no keep-alive timer from an earlier request may cut it (Node arms
  // one when an earlier response finishes).
  socket.setTimeout(0);
  socket.setNoDelay(true);
  if (!authorizeConnect(ctx, req, socket, client, unauthenticated)) return;
  const destination = parseConnectTarget(req.url ?? '');
  if (!destination) {
    const scoped = scopedIpv6Literal(req.url ?? '');
    const err = scoped ? new NotAllowedError(unroutableIpMessage(scoped)) : new BadRequestError(authorityProblem(req.url ?? ''));
    const reply = ctx.stats.failed('http-connect', client, undefined, err);
    endWithReply(socket, rawErrorResponse(reply.http, `kubectl-proxyout: ${reply.message}`, [], true));
    return;
  }
  const outcome = await openHeld(ctx.opener, ctx.log, socket, { destination, frontEnd: 'http-connect', client }, 'CONNECT client');
  if (!outcome) return;
  if ('failed' in outcome) {
    const reply = ctx.stats.failed('http-connect', client, destination, outcome.failed);
    const what = formatHostPort(destination.host, destination.port);
    endWithReply(socket, rawErrorResponse(reply.http, `kubectl-proxyout: cannot connect to ${what}: ${reply.message}`, [], true));
    return;
  }
  const { opened, head: later } = outcome;
  const record = ctx.stats.opened('http-connect', client, destination, opened.via, opened.route, opened.transport);
  ctx.stats.follow(record, opened);
  socket.write('HTTP/1.1 200 Connection established\r\n\r\n');
  const pipelined = later.length > 0 ? Buffer.concat([head, later]) : head;
  record.live = startRelay(socket, opened, pipelined, ctx.log, (result) =>
    ctx.stats.closed(record, result.bytesFromClient, result.bytesToClient, result.error),
  );
}
