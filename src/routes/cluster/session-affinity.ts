// Service sessionAffinity: ClientIP, kept as kube-proxy keeps it (pkg/proxy/iptables/proxier.go:
// an `-m recent` list per service port and endpoint, checked and refreshed by each new connection
// from the client's address, forgotten after sessionAffinityConfig.clientIP.timeoutSeconds
// without one). Here the client is the address that connected to the proxy: every local program
// shares 127.0.0.1, as they would share the laptop's address behind kube-proxy. An endpoint that
// is no longer ready is no longer among the candidates, and the client gets another.
import type { PodPort } from '../../tunnel/transport.js';

/** Clients × service ports remembered; past this, expired ones are dropped, then all. */
const AFFINITY_MAX = 10_000;

interface Stuck {
  namespace: string;
  pod: string;
  uid: string | undefined;
  port: number;
  until: number;
}

export class SessionAffinity {
  private readonly stuck = new Map<string, Stuck>();

  constructor(private readonly now: () => number = Date.now) {}

  /** The endpoint `key` (client and service port) stuck to, if it is still a candidate and not expired. */
  find(key: string, candidates: readonly PodPort[]): PodPort | undefined {
    const s = this.stuck.get(key);
    if (!s) return undefined;
    if (s.until <= this.now()) {
      this.stuck.delete(key);
      return undefined;
    }
    return candidates.find(
      (c) => c.namespace === s.namespace && c.pod === s.pod && c.port === s.port && (c.uid === undefined || s.uid === undefined || c.uid === s.uid),
    );
  }

  /** A connection to `c` opened: the client sticks to it for `seconds` from now. */
  remember(key: string, c: PodPort, seconds: number): void {
    if (this.stuck.size >= AFFINITY_MAX && !this.stuck.has(key)) this.dropExpired();
    this.stuck.set(key, { namespace: c.namespace, pod: c.pod, uid: c.uid, port: c.port, until: this.now() + seconds * 1000 });
  }

  private dropExpired(): void {
    const now = this.now();
    for (const [key, s] of this.stuck) if (s.until <= now) this.stuck.delete(key);
    if (this.stuck.size >= AFFINITY_MAX) this.stuck.clear();
  }
}
