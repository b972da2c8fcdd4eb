// Port mappings (--forward [ADDR:]LPORT=TARGET:PORT): a plain TCP listener per mapping for
// clients that speak no proxy protocol (database shells, redis-cli, gRPC tools). Each accepted
// connection is opened exactly as a SOCKS CONNECT to TARGET would be — through the same opener
// (limiter → router → routes), so it is spread over ready endpoints, moved to another one on a
// refusal and reaches new pods after a restart — then relayed byte for byte. There is no protocol
// to report a failure in: the client's connection is closed once the reason is logged.
import net from 'node:net';
import type { Destination } from '../core/types.js';
import { formatHostPort, isLoopbackHost } from '../core/address.js';
import { StartupError } from '../core/errors.js';
import type { Listener, ListenerContext } from './listener.js';
import { startRelay } from './relay.js';
import { startOnLoopbacks } from './loopbacks.js';
import { CLIENT_SOCKET_HIGH_WATER, ClientTracker, clientName, closeServer, endWithReply, openHeld, listenOn } from './server-base.js';

export interface ForwardListener extends Listener {
  readonly kind: 'forward';
  readonly target: Destination;
}

/**
 * Listens on host:port for `target`. The flag text is for messages. A mapping has no way to
 * authenticate its clients, so it refuses to bind anything but loopback (with or without proxy
 * credentials), checked on the address actually bound.
 */
export async function startForwardListener(
  host: string,
  port: number,
  target: Destination,
  ctx: ListenerContext,
  flag = '--forward',
): Promise<ForwardListener> {
  const tracker = new ClientTracker(ctx.log, ctx.connections);
  // allowHalfOpen: a client's FIN must not end our side; the relay forwards it as a half-close.
  const server = net.createServer({ allowHalfOpen: true, noDelay: true, highWaterMark: CLIENT_SOCKET_HIGH_WATER }, (socket) => {
    if (!tracker.add(socket)) return;
    handleClient(socket, target, ctx).catch((err: unknown) => {
      ctx.log.error({ err }, 'port mapping connection failed unexpectedly');
      socket.destroy();
    });
  });
  const address = await listenOn(server, host, port, `port mapping to ${formatHostPort(target.host, target.port)}`);
  // The text check (core/address.ts forwardListenProblem) passed a name like `localhost`; only the
  // address actually bound says whether it is loopback.
  if (!isLoopbackHost(address.address)) {
    await new Promise((r) => server.close(r));
    throw new StartupError(
      `${flag}: ${host} bound ${formatHostPort(address.address, address.port)}, which is not a loopback address; a port mapping cannot authenticate its clients, so it listens on loopback only`,
    );
  }
  server.on('error', (err) => ctx.log.error({ err }, 'port mapping listener error'));
  return {
    kind: 'forward',
    address,
    target,
    connections: () => tracker.size,
    close: (graceMs: number) => closeServer(server, tracker, graceMs),
  };
}

/** The listeners of one mapping: `localhost` means both loopback addresses (loopbacks.ts). */
export function startForwardListeners(host: string, port: number, target: Destination, ctx: ListenerContext, flag = '--forward'): Promise<ForwardListener[]> {
  return startOnLoopbacks(host, port, (h, p) => startForwardListener(h, p, target, ctx, flag), ctx.log, flag);
}

async function handleClient(socket: net.Socket, destination: Destination, ctx: ListenerContext): Promise<void> {
  const client = clientName(socket);
  // The client may speak first (redis, HTTP): its bytes are kept for the upstream meanwhile, and
  // its FIN may come with them (finIsGone false).
  const outcome = await openHeld(ctx.opener, ctx.log, socket, { destination, frontEnd: 'forward', client }, 'port mapping client', false);
  if (!outcome) return;
  if ('failed' in outcome) {
    // Logged and counted in the one place; the client only sees its connection close.
    ctx.stats.failed('forward', client, destination, outcome.failed);
    endWithReply(socket, Buffer.alloc(0));
    return;
  }
  const { opened, head } = outcome;
  const record = ctx.stats.opened('forward', client, destination, opened.via, opened.route, opened.transport);
  ctx.stats.follow(record, opened);
  record.live = startRelay(socket, opened, head, ctx.log, (result) => ctx.stats.closed(record, result.bytesFromClient, result.bytesToClient, result.error));
}
