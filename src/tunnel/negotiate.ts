// Picks the port-forward transport for one cluster: `spdy` (one multiplexed tunnel per pod),
// `websocket` (one v4.channel.k8s.io WebSocket per stream), or `auto`: SPDY first and, when the
// API server does not upgrade to the tunnel, the per-stream WebSocket — as kubectl's fallback
// dialer does (client-go tools/portforward/fallback_dialer.go), except that we remember the answer
// for the cluster instead of asking again for every stream — for RELEARN_MS: then one stream asks
// again, so a cluster upgraded under a running proxy (a 1.29 API server replaced by a 1.30 one, the
// gate turned on) gets its tunnel back.
//
// Which refusals say "this server has no tunnel" (remembered) and which say nothing about the
// protocol (this stream falls back, the next one asks again): a 101 with another subprotocol and
// 4xx answers other than 401/403/404/408/429 are remembered — a Kubernetes ≤ 1.29 API server (or
// the PortForwardWebsockets gate off) hands the request to the kubelet's v4 handler, which answers
// 400 `query parameter "port" is required` in plain text. Credentials, RBAC, a vanished pod and 5xx
// are not, nor is any refusal the API server words itself as a Status object: a 400 Status is about
// this pod (e.g. `pod db-0 does not have a host assigned` for one no node has taken yet,
// pkg/registry/core/pod/strategy.go), and must not cost the whole cluster its tunnel.
import type { Duplex } from 'node:stream';
import type { Logger } from '../core/log.js';
import { PortForwardForbiddenError, ProxyError } from '../core/errors.js';
import { abortable } from '../core/abort.js';
import { testHookMs } from '../core/test-hooks.js';
import type { OpenOptions, PodPort, PodRef, Transport } from './transport.js';
import { TunnelRefusal } from './spdy/tunnel.js';
import type { PodTransportStats, SpdyTransport } from './spdy-transport.js';

export const TRANSPORT_MODES = ['auto', 'spdy', 'websocket'] as const;
export type TransportMode = (typeof TRANSPORT_MODES)[number];

/**
 * How long RBAC's refusal of a pod's port-forward answers its new streams without an upgrade: a
 * retrying client must not send the API server a 403 per connection; a RoleBinding granted
 * meanwhile is seen this soon.
 */
const FORBIDDEN_MS = 5_000;

/** How long a pod a per-stream WebSocket opened to takes bursts without one stream going first. */
const V4_ALLOWED_MS = 5 * 60_000;

const podKey = (pod: PodRef): string => `${pod.namespace}/${pod.pod}`;

/** How long auto keeps a "no tunnel here" answer before one stream asks the API server again. */
const RELEARN_MS = testHookMs('PROXYOUT_TEST_RELEARN_TRANSPORT_MS') ?? 10 * 60_000;

export function tunnelRefusalOf(err: unknown): TunnelRefusal | undefined {
  return err instanceof ProxyError && err.cause instanceof TunnelRefusal ? err.cause : undefined;
}

export class NegotiatingTransport implements Transport {
  /** What auto settled on for this cluster; undefined while SPDY has not been refused. */
  private learned?: 'websocket';
  /** When `learned` was last confirmed; a stream asking again (probing) is under way. */
  private learnedAt = 0;
  private probing = false;
  private readonly v4Streams = new Map<string, number>();
  /** The streams a per-stream WebSocket carries (all of them once learned; one alone after a refusal that says nothing of the protocol). */
  private readonly v4Carried = new WeakSet<Duplex>();
  /** Pods (namespace/name) with no stream open whose first per-stream WebSocket is under way: settles at its answer. */
  private readonly v4First = new Map<string, Promise<void>>();
  /** Pods (namespace/name) a per-stream WebSocket opened to lately, and until when their streams go without waiting. */
  private readonly v4Allowed = new Map<string, number>();
  /** Pods (namespace/name) whose port-forward RBAC refused lately, and until when that holds. */
  private readonly forbidden = new Map<string, { until: number; err: PortForwardForbiddenError }>();

  constructor(
    private readonly mode: TransportMode,
    private readonly spdy: SpdyTransport,
    private readonly v4: Transport,
    private readonly log: Logger,
    private readonly cluster: string,
  ) {}

  get name(): string {
    if (this.mode !== 'auto') return this.mode;
    return this.learned ?? 'spdy';
  }

  carrierOf(stream: Duplex): string {
    return this.v4Carried.has(stream) ? 'websocket' : 'spdy';
  }

  openTunnels(): number {
    return this.spdy.openTunnels() + this.v4.openTunnels();
  }

  /** Per pod: transport in use, tunnels (per-stream WebSockets count one each), streams. */
  stats(): PodTransportStats[] {
    const out = this.spdy.stats();
    for (const [pod, streams] of this.v4Streams) out.push({ pod, transport: 'websocket', tunnels: streams, streams });
    return out.sort((a, b) => a.pod.localeCompare(b.pod) || a.transport.localeCompare(b.transport));
  }

  async close(): Promise<void> {
    await Promise.all([this.spdy.close(), this.v4.close()]);
  }

  podGone(pod: PodRef): void {
    this.spdy.podGone(pod);
    this.v4.podGone?.(pod);
  }

  afterPause(checkMs: number): void {
    this.spdy.afterPause(checkMs);
    this.v4.afterPause?.(checkMs);
  }

  async open(target: PodPort, options: OpenOptions): Promise<Duplex> {
    // Per connection: the key is made only when some pod was refused lately (almost never).
    if (this.forbidden.size > 0) {
      const key = podKey(target);
      const refused = this.forbidden.get(key);
      if (refused && refused.until > Date.now()) throw refused.err;
      this.forbidden.delete(key);
    }
    try {
      return await this.openBy(target, options);
    } catch (err) {
      if (err instanceof PortForwardForbiddenError) this.rememberForbidden(podKey(target), err);
      throw err;
    }
  }

  private rememberForbidden(key: string, err: PortForwardForbiddenError): void {
    const now = Date.now();
    if (this.forbidden.size >= 10_000) for (const [k, f] of this.forbidden) if (f.until <= now) this.forbidden.delete(k);
    if (this.forbidden.size < 10_000) this.forbidden.set(key, { until: now + FORBIDDEN_MS, err });
  }

  private async openBy(target: PodPort, options: OpenOptions): Promise<Duplex> {
    if (this.mode === 'websocket') return this.openV4(target, options);
    if (this.mode === 'spdy') return this.spdy.open(target, options);
    const probe = this.learned === 'websocket' && !this.probing && Date.now() - this.learnedAt >= RELEARN_MS;
    if (this.learned === 'websocket' && !probe) return this.openV4(target, options);
    this.probing ||= probe;
    try {
      const stream = await this.spdy.open(target, options);
      if (probe && this.learned) {
        this.learned = undefined;
        this.log.info({ cluster: this.cluster }, 'the API server offers the SPDY port-forward tunnel now; using it for this cluster');
      }
      return stream;
    } catch (err) {
      const refusal = tunnelRefusalOf(err);
      // RBAC authorizes both transports' upgrades alike: a per-stream WebSocket would be refused too.
      if (!refusal || options.signal.aborted || err instanceof PortForwardForbiddenError) throw err;
      if (refusal.meansNoTunnel) {
        if (this.learned === undefined) {
          this.log.warn(
            { cluster: this.cluster, answer: refusal.message },
            'the API server does not offer the SPDY port-forward tunnel; using one WebSocket per stream (v4.channel.k8s.io) for this cluster',
          );
        }
        this.learned = 'websocket';
        this.learnedAt = Date.now();
      } else {
        this.log.debug(
          { cluster: this.cluster, target: `${target.namespace}/${target.pod}`, answer: refusal.message },
          'SPDY tunnel refused; trying a per-stream WebSocket',
        );
      }
      return this.openV4(target, options);
    } finally {
      if (probe) this.probing = false;
    }
  }

  private async openV4(target: PodPort, options: OpenOptions): Promise<Duplex> {
    const key = podKey(target);
    const stream = await this.firstV4(key, target, options);
    this.v4Carried.add(stream);
    this.v4Streams.set(key, (this.v4Streams.get(key) ?? 0) + 1);
    stream.once('close', () => {
      const n = (this.v4Streams.get(key) ?? 1) - 1;
      if (n > 0) this.v4Streams.set(key, n);
      else this.v4Streams.delete(key);
    });
    return stream;
  }

  /**
   * A per-stream WebSocket to a pod not allowed lately: while one such upgrade is out, the others
   * wait for its answer, so a burst to a pod RBAC refuses costs one 403, not one per stream (the
   * SPDY path gets this from sharing the tunnel being opened). A pod allowed lately is not waited for.
   */
  private async firstV4(key: string, target: PodPort, options: OpenOptions): Promise<Duplex> {
    if (this.v4Streams.has(key) || (this.v4Allowed.get(key) ?? 0) > Date.now()) return this.v4.open(target, options);
    const first = this.v4First.get(key);
    if (first) {
      await abortable(first, options.signal);
      const refused = this.forbidden.get(key);
      if (refused && refused.until > Date.now()) throw refused.err;
      return this.v4.open(target, options);
    }
    let answered!: () => void;
    this.v4First.set(key, new Promise<void>((resolve) => (answered = resolve)));
    try {
      const stream = await this.v4.open(target, options);
      if (this.v4Allowed.size >= 10_000) this.v4Allowed.clear();
      this.v4Allowed.set(key, Date.now() + V4_ALLOWED_MS);
      return stream;
    } catch (err) {
      // Remembered before the waiting streams read it.
      if (err instanceof PortForwardForbiddenError) this.rememberForbidden(key, err);
      throw err;
    } finally {
      this.v4First.delete(key);
      answered();
    }
  }
}
