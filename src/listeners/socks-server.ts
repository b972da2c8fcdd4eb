// The SOCKS front end: SOCKS5 (RFC 1928) and SOCKS4/4A on one port, CONNECT only. Protocol
// parsing lives in socks-protocol.ts; this module does the socket work around it.
import net from 'node:net';
import { BadRequestError, ProxyAuthRequiredError, SocksReply } from '../core/errors.js';
import { formatHostPort } from '../core/address.js';
import { rawErrorResponse } from './http-server.js';
import { WRONG_CREDENTIALS } from '../auth/credentials.js';
import type { FrontEnd } from '../core/types.js';
import type { Listener, ListenerContext } from './listener.js';
import { startRelay } from './relay.js';
import { UnauthenticatedConnections } from './unauthenticated.js';
import {
  CLIENT_SOCKET_HIGH_WATER,
  ClientTracker,
  clientName,
  clientSource,
  closeServer,
  endWithReply,
  openHeld,
  listenOn,
  type UnixListen,
} from './server-base.js';
import {
  SocksHandshakeParser,
  SocksMethod,
  encodeAuthStatus,
  encodeMethodSelection,
  encodeSocks4Reply,
  encodeSocks5Reply,
  noAuthPolicy,
  userPassPolicy,
  type SocksMethodPolicy,
  type SocksStep,
} from './socks-protocol.js';

export interface SocksListenerOptions {
  /** Which RFC 1928 method to pick from a client's offer; defaults to "no authentication". */
  methodPolicy?: SocksMethodPolicy;
  /** With authentication on: connections not yet authenticated per source (listeners/unauthenticated.ts). */
  maxUnauthenticatedPerSource?: number;
}

export async function startSocksListener(host: string | UnixListen, port: number, ctx: ListenerContext, options: SocksListenerOptions = {}): Promise<Listener> {
  const policy = options.methodPolicy ?? (ctx.auth ? userPassPolicy : noAuthPolicy);
  const tracker = new ClientTracker(ctx.log, ctx.connections);
  const unauthenticated = ctx.auth ? new UnauthenticatedConnections(ctx.log, options.maxUnauthenticatedPerSource) : undefined;
  // allowHalfOpen: a client's FIN must not end our side; the relay forwards it as a half-close.
  const server = net.createServer({ allowHalfOpen: true, noDelay: true, highWaterMark: CLIENT_SOCKET_HIGH_WATER }, (socket) => {
    if (!tracker.add(socket)) return;
    unauthenticated?.admit(socket);
    handleClient(socket, ctx, policy, unauthenticated);
  });
  const address = await listenOn(server, host, port, 'SOCKS', { flag: '--listen-socks', hasCredentials: ctx.auth !== undefined });
  server.on('error', (err) => ctx.log.error({ err }, 'SOCKS listener error'));
  return {
    kind: 'socks',
    address,
    connections: () => tracker.size,
    close: (graceMs: number) => closeServer(server, tracker, graceMs),
  };
}

function handleClient(socket: net.Socket, ctx: ListenerContext, policy: SocksMethodPolicy, unauthenticated?: UnauthenticatedConnections): void {
  const client = clientName(socket);
  const parser = new SocksHandshakeParser();
  // A deadline for the whole handshake, not an idle timer: a client dribbling one byte at a
  // time must not hold the connection forever.
  const timer = setTimeout(
    () => {
      ctx.log.debug({ client }, 'SOCKS handshake timed out');
      socket.destroy();
    },
    ctx.handshakeTimeoutMs > 0 ? ctx.handshakeTimeoutMs : 2 ** 31 - 1,
  );
  const onClose = (): void => clearTimeout(timer);
  // Once the handshake is over nothing may keep this scope (the parser and its bytes) alive for
  // the connection's life: no listener of ours stays on the socket.
  const stop = (): void => {
    clearTimeout(timer);
    socket.off('data', onData);
    socket.off('end', onEnd);
    socket.off('close', onClose);
  };
  const onEnd = (): void => {
    stop();
    socket.destroy();
  };
  const onData = (chunk: Buffer): void => {
    parser.push(chunk);
    for (;;) {
      const step = parser.next();
      if (step.type === 'more') return;
      if (step.type === 'greeting') {
        const method = policy.selectMethod(step.methods);
        parser.methodSelected(method);
        if (method === SocksMethod.noAcceptable) {
          stop();
          if (ctx.auth) {
            // Worth a warning, not debug: a client configured without the proxy's credentials.
            ctx.stats.failed(
              'socks5',
              client,
              undefined,
              new ProxyAuthRequiredError('proxy authentication is on and the SOCKS5 client offered no username/password (RFC 1929)'),
            );
            endWithReply(socket, encodeMethodSelection(method));
            return;
          }
          ctx.log.debug({ client, methods: step.methods }, 'SOCKS5 client offered no acceptable method');
          endWithReply(socket, encodeMethodSelection(method));
          return;
        }
        socket.write(encodeMethodSelection(method));
        continue;
      }
      if (step.type === 'auth') {
        // Checked before any throttling: a right password always passes (auth/throttle.ts).
        const throttle = ctx.auth?.throttle;
        const ok = ctx.auth?.verify(step.username, step.password) ?? false;
        parser.authResult(ok);
        if (ok) {
          unauthenticated?.authenticated(socket);
          socket.write(encodeAuthStatus(true));
          continue;
        }
        stop();
        ctx.stats.failed('socks5', client, undefined, new ProxyAuthRequiredError(WRONG_CREDENTIALS));
        if (throttle)
          throttle.delayFailure(
            clientSource(socket),
            () => endWithReply(socket, encodeAuthStatus(false)),
            () => socket.destroyed,
          );
        else endWithReply(socket, encodeAuthStatus(false));
        return;
      }
      stop();
      if (step.type === 'close') {
        ctx.log.debug({ client, reason: step.reason }, 'SOCKS connection dropped');
        socket.destroy();
      } else if (step.type === 'tls') {
        // HTTPS_PROXY=https://… for this port: its client says only "connection reset"; the log says why.
        const here = socket.localPort === undefined ? 'HOST:PORT' : formatHostPort(socket.localAddress ?? '127.0.0.1', socket.localPort);
        ctx.stats.failed(
          'socks5',
          client,
          undefined,
          new BadRequestError(`a TLS client reached the SOCKS listener: use socks5h://${here} as the proxy URL, not https://`),
        );
        socket.destroy();
      } else if (step.type === 'http') {
        // A common mistake (http_proxy=http://127.0.0.1:1080): an empty reply would say nothing.
        const here = socket.localPort === undefined ? 'HOST:PORT' : formatHostPort(socket.localAddress ?? '127.0.0.1', socket.localPort);
        const reply = ctx.stats.failed(
          'socks5',
          client,
          undefined,
          new BadRequestError(`an HTTP request reached the SOCKS listener: use socks5h://${here} as the proxy, or an HTTP listener (--listen-http)`),
        );
        endWithReply(socket, rawErrorResponse(reply.http, `kubectl-proxyout: ${reply.message}`, [], true));
      } else if (step.type === 'connect' && step.version === 4 && ctx.auth) {
        ctx.stats.failed(
          'socks4',
          client,
          step.destination,
          new ProxyAuthRequiredError('SOCKS4 cannot carry a password and proxy authentication is on: use SOCKS5 (socks5h://user:password@host:port)'),
        );
        endWithReply(socket, encodeSocks4Reply(false));
      } else if (step.type === 'reject') {
        const reply = ctx.stats.failed(frontEndOf(step.version), client, step.destination, step.error);
        endWithReply(socket, step.version === 5 ? encodeSocks5Reply(reply.socks) : encodeSocks4Reply(false));
      } else {
        connect(socket, ctx, client, step, parser.rest());
      }
      return;
    }
  };
  socket.once('close', onClose);
  socket.on('data', onData);
  socket.on('end', onEnd);
}

function frontEndOf(version: 4 | 5): FrontEnd {
  return version === 5 ? 'socks5' : 'socks4';
}

/** Never throws: a failure nobody mapped is logged and the client cut off. */
function connect(socket: net.Socket, ctx: ListenerContext, client: string, step: Extract<SocksStep, { type: 'connect' }>, pipelined: Buffer): void {
  connectAndRelay(socket, ctx, client, step, pipelined).catch((err: unknown) => {
    ctx.log.error({ err, client }, 'SOCKS connection failed unexpectedly');
    socket.destroy();
  });
}

async function connectAndRelay(
  socket: net.Socket,
  ctx: ListenerContext,
  client: string,
  step: Extract<SocksStep, { type: 'connect' }>,
  pipelined: Buffer,
): Promise<void> {
  const { version, destination } = step;
  const frontEnd = frontEndOf(version);
  const outcome = await openHeld(ctx.opener, ctx.log, socket, { destination, frontEnd, client }, 'SOCKS client');
  if (!outcome) return;
  if ('failed' in outcome) {
    const reply = ctx.stats.failed(frontEnd, client, destination, outcome.failed);
    endWithReply(socket, version === 5 ? encodeSocks5Reply(reply.socks) : encodeSocks4Reply(false));
    return;
  }
  const { opened, head: later } = outcome;
  const record = ctx.stats.opened(frontEnd, client, destination, opened.via, opened.route, opened.transport);
  ctx.stats.follow(record, opened);
  socket.write(version === 5 ? encodeSocks5Reply(SocksReply.succeeded, { address: socket.localAddress, port: socket.localPort }) : encodeSocks4Reply(true));
  const head = later.length > 0 ? Buffer.concat([pipelined, later]) : pipelined;
  record.live = startRelay(socket, opened, head, ctx.log, (result) => ctx.stats.closed(record, result.bytesFromClient, result.bytesToClient, result.error));
}
