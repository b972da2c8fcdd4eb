import type { Duplex } from 'node:stream';
import type { UpstreamStream } from '../core/stream-pieces.js';

/** One pod instance. A name comes back after a delete (StatefulSets); the UID never does. */
export interface PodRef {
  namespace: string;
  pod: string;
  /** metadata.uid when known: tunnels belong to a pod instance, not to its name. */
  uid?: string;
}

/** One TCP port of one pod: what a transport connects to. */
export interface PodPort extends PodRef {
  port: number;
}

export interface OpenOptions {
  signal: AbortSignal;
  /**
   * How long to wait after the tunnel is up for an error from the kubelet's dial before calling
   * the stream connected. 0 means "connected as soon as the tunnel is up".
   */
  confirmMs: number;
}

/**
 * Client bytes a stream keeps to write them again elsewhere: the route's retry wrapper until the
 * pod's first byte (routes/cluster/retry-stream.ts), a SPDY stream until the kubelet took it
 * (spdy/goaway-replay.ts). A client that sends more first gives that chance up.
 */
export const MAX_REPLAY_BYTES = 256 * 1024;

/**
 * Carries one TCP stream to a pod port. Implementations: per-stream port-forward WebSocket
 * (v4.channel.k8s.io), SPDY-over-WebSocket multiplexing (one tunnel per pod), and the choice
 * between them (negotiate.ts). SSH and konnectivity routes dial without a Transport
 * (routes/ssh/route.ts, routes/konnectivity/streams.ts).
 * open() rejects with a ProxyError (core/errors.ts); the Duplex it resolves to ends when the pod
 * side ends and is destroyed with a ProxyError when the pod side fails.
 * A dial into the pod that fails after open() resolved (confirmMs 0) but before the pod sent a
 * byte destroys the Duplex with a *retryable* ProxyError: ClusterRoute then replays the client's
 * bytes to another endpoint (routes/cluster/retry-stream.ts). Other failures are never retryable then.
 * A stream the server never took at all (a SPDY GOAWAY crossed it) is the transport's own affair:
 * it opens it again on a new tunnel to the same pod (spdy/goaway-replay.ts) before it fails.
 */
export interface Transport {
  readonly name: string;
  /** The transport that carries `stream` (one this opened), where it may not be `name`: auto falls back per stream (negotiate.ts). */
  carrierOf?(stream: Duplex): string;
  /** The stream, with its piece hints when it gives any (SPDY: core/stream-pieces.ts). */
  open(target: PodPort, options: OpenOptions): Promise<UpstreamStream>;
  /** Tunnels currently open, for status output. */
  openTunnels(): number;
  /** The pod instance was deleted (or stopped running): tunnels to it close. */
  podGone?(pod: PodRef): void;
  /** The process was paused (asleep): tunnels held across it are checked within `checkMs`; none is reused unchecked. */
  afterPause?(checkMs: number): void;
  close(): Promise<void>;
}
