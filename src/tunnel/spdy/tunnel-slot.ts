// What a port-forward stream (pf-stream.ts) holds of the tunnel pool (spdy-transport.ts): a slot
// on one tunnel, and the hooks it calls — shared by the tunnel's streams, so a stream keeps no
// closures of its own. Its own module so that the stream, the pool and goaway-replay.ts import it
// without importing one another.
import type { PodPort } from '../transport.js';
import type { PodTunnel } from './tunnel.js';

export interface PodStreamHooks {
  /** The stream no longer uses its tunnel slot (called once per slot). */
  release(): void;
  /** The tunnel's pod is gone: no new streams on it. */
  retire(): void;
  /**
   * The kubelet never took this stream's pair (its GOAWAY): a tunnel to the same pod instance that
   * takes streams — a new one if no other does — with a slot taken there for this stream. Rejects
   * with a ProxyError, having given that slot back.
   */
  reopen(target: PodPort, signal: AbortSignal): Promise<TunnelSlot>;
}

/** A tunnel with a slot taken for one stream, and what that stream calls when done with it. */
export interface TunnelSlot {
  readonly tunnel: PodTunnel;
  readonly hooks: PodStreamHooks;
}
