import type { UpstreamStream } from './stream-pieces.js';

/** Where a client asked to go, exactly as it asked (a name is never resolved locally). */
export interface Destination {
  /** A DNS name (no trailing dot normalisation here), or an IPv4/IPv6 literal without brackets. */
  host: string;
  port: number;
  /** How the client expressed the host. */
  type: 'domain' | 'ipv4' | 'ipv6';
}

/**
 * The front end that accepted the request, for logs and statistics. 'forward': a plain TCP port
 * mapping (--forward), opened as a SOCKS CONNECT to its fixed target would be.
 */
export type FrontEnd = 'socks5' | 'socks4' | 'http-connect' | 'http-forward' | 'forward';

export interface OpenRequest {
  destination: Destination;
  frontEnd: FrontEnd;
  /** "ip:port" of the client, for logs. */
  client: string;
  /** Aborted when the client goes away before the stream is open. */
  signal: AbortSignal;
}

/**
 * How long a half-closed stream may wait for the pod's first byte: the runtime may still be
 * dialling the pod (its dial has no timeout; a full accept backlog retries the SYN after 1, 2,
 * 4 s) and only then reads the request and the FIN. kubectl waits as long as the dial takes.
 */
export const POD_FIRST_BYTE_GRACE_MS = 10_000;

/** A byte stream to the destination. Ending it half-closes; destroying it aborts. */
export interface OpenedStream {
  /** With the piece hints of the transport underneath, when it gives any (core/stream-pieces.ts). */
  stream: UpstreamStream;
  /** Short description of where it really went (e.g. "shop/web-7d9f-abc:8080"), for logs. */
  via: string;
  /** The route of the routing table that carries it (routing/router.ts). */
  route?: string;
  /** The port-forward transport that carries it (spdy, websocket), for routes that have one. */
  transport?: string;
  /** The --max-streams slot this stream holds, when a limiter gave it (proxy/limits.ts). */
  slot?: StreamSlot;
  /**
   * The far end answers the client's FIN as TCP does, sending the rest of its answer and then its
   * own FIN (a TCP socket, an SSH channel): the relay waits for it with no tear-down clock.
   */
  tcpHalfClose?: boolean;
  /**
   * Tells `listener` where the stream went when it moved to another endpoint before the pod spoke
   * (routes/cluster/retry-stream.ts), so logs and the live page name the pod that answered.
   */
  onMove?(listener: (via: string) => void): void;
  /**
   * Whether a new stream to the same destination would still take this route (a reload or a
   * learnt ingress host may have moved it) and, for a Service, go to this pod (a selector edited,
   * a rollout): a pooled stream is reused only while it would. Set for the HTTP listener's
   * streams, the only ones pooled.
   */
  stillRouted?: () => boolean;
}

/** A place under the stream cap: given back when the client is done with the stream. */
export interface StreamSlot {
  /** The client no longer holds this stream (idempotent). */
  release(): void;
  /** A client holds it again (a pooled upstream stream reused); never refused. */
  retake(): void;
}

/**
 * What the listeners call for every CONNECT: resolve, route and open a stream. It throws a
 * ProxyError (see core/errors.ts) on failure; it never writes to the client itself.
 */
export interface StreamOpener {
  open(request: OpenRequest): Promise<OpenedStream>;
}
