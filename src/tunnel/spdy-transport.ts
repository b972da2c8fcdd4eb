// Multiplexed pod port-forward: per pod one SPDY/3.1 session tunnelled in a WebSocket (see
// spdy/tunnel.ts), and per TCP stream a pair of SPDY streams in it (spdy/pf-stream.ts) — what
// kubectl port-forward does since 1.31 (client-go tools/portforward/tunneling_dialer.go). A new
// stream costs two SYN_STREAMs on a warm tunnel instead of a TLS handshake and an HTTP upgrade.
//  - A tunnel opens on first use and stays while streams use it, then IDLE_MS longer.
//  - A tunnel takes new streams for reauthorizeMs after it opened, then only finishes its own:
//    the API server authorizes port-forward at the upgrade only, so a right revoked (or a pod no
//    longer in a Role's resourceNames) is seen at the next tunnel, as kubectl sees it at its next call.
//  - At most maxStreamsPerTunnel TCP streams share one tunnel; the next stream opens another.
//    This bounds head-of-line blocking: without SPDY flow control, a reader that falls far behind
//    pauses its whole tunnel (and the kubelet pauses a session whose pod does not read), for
//    10 s at most while others share it (tunnel.ts). A new stream passes over a tunnel in either
//    state and opens another.
//  - A broken tunnel fails only its own streams; the next stream opens a new tunnel. A tunnel that
//    got the kubelet's GOAWAY takes no new streams; one whose SYN_STREAMs crossed the GOAWAY asks
//    for a new tunnel to the same pod itself (hooks.reopen, spdy/goaway-replay.ts).
//  - Tunnels belong to a pod instance (namespace/name and UID): a pod deleted and created again
//    under its name (StatefulSets) gets a new tunnel. The old one is closed (GOAWAY) when the cache
//    sees the instance go (podGone), and retired at once when the kubelet says its sandbox is gone
//    (a session outlives its pod and answers "failed to find sandbox … not found").
//  - A tunnel that answers no new stream for a while (spdy/reply-watch.ts) must answer a PING at
//    once, or it closes: a path gone silent costs seconds, not the keepalive's 25 s.
//  - close() sends GOAWAY on every tunnel and closes it.
import type { Duplex } from 'node:stream';
import type { Logger } from '../core/log.js';
import { ConnectTimeoutError, HostUnreachableError, UpstreamApiError, errorMessage, type ProxyError } from '../core/errors.js';
import type { ApiConnection } from '../cluster/api.js';
import type { OpenOptions, PodPort, PodRef, Transport } from './transport.js';
import { upgradeDropped, upgradeForbidden, upgradeRefusalDetail } from './pod-stream.js';
import { PodTunnel, TunnelRefusal, dialTunnel } from './spdy/tunnel.js';
import { SpdyFloodError } from './spdy/session.js';
import { SpdyPortForwardStream } from './spdy/pf-stream.js';
import type { PodStreamHooks, TunnelSlot } from './spdy/tunnel-slot.js';
import { DEFAULT_KEEPALIVE, type KeepaliveOptions } from './keepalive.js';
import { abortable } from '../core/abort.js';
import { monotonicMs } from '../core/clock.js';

export interface SpdyTransportOptions {
  maxStreamsPerTunnel: number;
  /** How long an unused tunnel is kept. */
  idleMs: number;
  /** How long after its upgrade (its one authorization) a tunnel takes new streams. */
  reauthorizeMs: number;
  /** SPDY PING keepalive (kubectl pings every 10 s; the proxy passes --keepalive values). */
  keepalive: KeepaliveOptions;
  /** Limit for the WebSocket upgrade of a new tunnel. */
  connectTimeoutMs: number;
  /** A tunnel stopped answering pings: the path to the API server may be dead (the route checks it). */
  onDeadTunnel?: () => void;
}

/** How long a tunnel slow to answer SYN_STREAMs (spdy/reply-watch.ts) has to answer a PING. */
const SLOW_REPLY_CHECK_MS = 3_000;

export const SPDY_DEFAULTS: SpdyTransportOptions = {
  maxStreamsPerTunnel: 256,
  idleMs: 10_000,
  reauthorizeMs: 10_000,
  keepalive: DEFAULT_KEEPALIVE,
  connectTimeoutMs: 30_000,
};

/** Per-pod figures for `status` and the log. */
export interface PodTransportStats {
  /** The route, when the proxy has several cluster routes (proxy/tunnel-figures.ts). */
  route?: string;
  pod: string;
  transport: 'spdy' | 'websocket';
  tunnels: number;
  streams: number;
}

class TunnelEntry {
  constructor(
    /** namespace/name */
    readonly key: string,
    readonly uid: string | undefined,
  ) {}
  tunnel?: PodTunnel;
  /** When the API server authorized it (monotonic ms). */
  openedAt = 0;
  ready!: Promise<PodTunnel>;
  streams = 0;
  dead = false;
  /** Held across a pause, or slow to answer, and not yet heard from: takes no new stream. */
  suspect = false;
  /** A PING is out to tell whether it lives. */
  checking = false;
  idleTimer?: NodeJS.Timeout;
  /** What each stream on this tunnel calls when it is done with its slot, or finds the pod gone. */
  hooks!: PodStreamHooks;
}

export class SpdyTransport implements Transport {
  readonly name = 'spdy';
  private readonly pods = new Map<string, TunnelEntry[]>();
  private readonly options: SpdyTransportOptions;
  private closed = false;

  constructor(
    private readonly api: ApiConnection,
    private readonly log: Logger,
    options: Partial<SpdyTransportOptions> = {},
  ) {
    this.options = { ...SPDY_DEFAULTS, ...options };
  }

  openTunnels(): number {
    let n = 0;
    for (const list of this.pods.values()) n += list.filter((e) => e.tunnel && !e.dead).length;
    return n;
  }

  /** Pods with a tunnel open: a tunnel still dialling (a hung kubelet holds it for up to connectTimeoutMs) is none yet. */
  stats(): PodTransportStats[] {
    const out: PodTransportStats[] = [];
    for (const pod of this.pods.keys()) {
      const figures = this.figures(pod);
      if (figures.tunnels > 0) out.push({ pod, transport: 'spdy', ...figures });
    }
    return out;
  }

  async close(): Promise<void> {
    this.closed = true;
    // shutdown() makes tunnels forget themselves from these lists: walk copies.
    for (const list of [...this.pods.values()]) for (const e of [...list]) this.shutdown(e);
    this.pods.clear();
  }

  async open(target: PodPort, options: OpenOptions): Promise<Duplex> {
    const { tunnel, hooks } = await this.slot(target, options.signal);
    // The stream calls release() once, when it is destroyed or moves to another slot (pf-stream.ts).
    return new SpdyPortForwardStream(tunnel, target, this.log, hooks).open(options);
  }

  /** A tunnel to the pod that takes one more stream, its slot taken; rejects with a ProxyError. */
  private async slot(target: PodPort, signal: AbortSignal): Promise<TunnelSlot> {
    if (this.closed) throw new UpstreamApiError('the proxy is shutting down');
    const entry = this.acquire(target);
    try {
      return { tunnel: await abortable(entry.ready, signal), hooks: entry.hooks };
    } catch (err) {
      entry.hooks.release();
      throw this.connectError(target, err, signal);
    }
  }

  /** The cache saw this pod instance go: its tunnels close now (GOAWAY); new streams open new ones. */
  podGone(pod: PodRef): void {
    const list = this.pods.get(this.key(pod));
    if (!list) return;
    for (const e of [...list]) {
      if (pod.uid !== undefined && e.uid !== undefined && e.uid !== pod.uid) continue;
      if (e.tunnel) e.tunnel.podWentAway = true;
      this.retire(e, 'the pod is gone');
    }
  }

  /**
   * After a pause (core/pause-detector.ts) every tunnel may be dead without a sign: idle ones
   * close; busy ones take no new stream until a PING comes back within `checkMs`, and close when
   * none does (their streams fail now, not after the keepalive's 25 s). New streams open new tunnels.
   */
  afterPause(checkMs: number): void {
    for (const list of [...this.pods.values()]) {
      for (const e of [...list]) {
        if (e.dead || !e.tunnel) continue;
        if (e.streams === 0) {
          this.shutdown(e, 'idle across a pause');
          continue;
        }
        this.check(e, checkMs, 'no answer to a PING after the process was paused');
      }
    }
  }

  /**
   * A busy tunnel that may be dead takes no new stream until a PING comes back within `checkMs`,
   * and closes when none does (its streams fail, or open again elsewhere: pf-stream.ts).
   */
  private check(e: TunnelEntry, checkMs: number, why: string, slowReplies = false): void {
    if (e.dead || !e.tunnel || e.checking) return;
    const tunnel = e.tunnel;
    // Our bytes wait to be written (a pod that does not read stalls the session): a PING waits
    // behind them too, so no answer proves nothing; the keepalive, which knows, judges it.
    if (slowReplies && !tunnel.flowing) return;
    e.suspect = true;
    // Held by a reader that is behind, it reads nothing, so no PING answer could be seen: no
    // verdict, and no new streams; its keepalive judges it once the reader catches up.
    if (tunnel.held) return;
    e.checking = true;
    const heard = tunnel.bytesIn;
    void tunnel.checkNow(checkMs).then((answered) => {
      e.checking = false;
      // Not after a pause, bytes heard meanwhile are fresh: a PING answer waiting behind a busy
      // download still proves the path (after a pause only the answer counts: checkNow).
      if (answered || (slowReplies && tunnel.bytesIn !== heard)) e.suspect = false;
      else {
        tunnel.wentSilent = true;
        // As when the keepalive finds it: the path to the API server may be dead (the route checks).
        if (slowReplies) this.options.onDeadTunnel?.();
        this.retire(e, why);
      }
    });
  }

  /** Streams wait for replies, and nothing was heard on the tunnel meanwhile (spdy/reply-watch.ts). */
  private checkSlow(e: TunnelEntry): void {
    this.check(e, SLOW_REPLY_CHECK_MS, 'no answer to a PING while streams waited for the kubelet', true);
  }

  /** No new streams on this tunnel; it closes now and its streams fail (they would only fail on a gone pod or a dead path). */
  private retire(entry: TunnelEntry, why: string): void {
    if (entry.dead) return;
    this.log.info({ pod: entry.key, uid: entry.uid, why }, 'closing the pod tunnel');
    this.shutdown(entry, undefined, new UpstreamApiError(`the port-forward tunnel to ${entry.key} was closed: ${why}`));
  }

  private key(t: PodRef): string {
    return `${t.namespace}/${t.pod}`;
  }

  private acquire(target: PodPort): TunnelEntry {
    const key = this.key(target);
    const list = this.pods.get(key) ?? [];
    this.pods.set(key, list);
    // A tunnel held by a reader that is behind reads nothing, and one whose writes the kubelet no
    // longer reads (a pod that does not read) takes nothing: a new stream there would wait for them.
    let entry = list.find(
      (e) =>
        !e.dead &&
        !e.suspect &&
        e.uid === target.uid &&
        !this.authorizationOld(e) &&
        (!e.tunnel || (e.tunnel.session.canOpen && !e.tunnel.held && !e.tunnel.writesStalled)) &&
        e.streams < this.options.maxStreamsPerTunnel,
    );
    if (!entry) {
      entry = this.connect(target, key);
      list.push(entry);
    }
    entry.streams++;
    clearTimeout(entry.idleTimer);
    return entry;
  }

  /** Authorized too long ago to take a new stream: RBAC is asked again by a new tunnel's upgrade. */
  private authorizationOld(e: TunnelEntry): boolean {
    return e.tunnel !== undefined && monotonicMs() - e.openedAt > this.options.reauthorizeMs;
  }

  private release(entry: TunnelEntry): void {
    entry.streams--;
    if (entry.streams > 0 || entry.dead) return;
    // No stream would take it again: no idle linger.
    if (this.authorizationOld(entry)) return this.shutdown(entry, 'authorized too long ago for new streams');
    entry.idleTimer = setTimeout(() => {
      if (entry.streams === 0) this.shutdown(entry, 'idle');
    }, this.options.idleMs);
    entry.idleTimer.unref();
    if (!entry.tunnel) this.log.debug({ pod: entry.key }, 'tunnel unused before it opened');
  }

  private connect(target: PodPort, key: string): TunnelEntry {
    const entry = new TunnelEntry(key, target.uid);
    // One set of hooks per tunnel, shared by its streams: a stream holds no closures of its own.
    // reopen: acquire() passes over tunnels that take no more streams (the kubelet's GOAWAY).
    entry.hooks = {
      release: () => this.release(entry),
      retire: () => this.retire(entry, 'the kubelet says the pod sandbox is gone'),
      reopen: (pod, signal) => this.slot(pod, signal),
    };
    const path = `/api/v1/namespaces/${encodeURIComponent(target.namespace)}/pods/${encodeURIComponent(target.pod)}/portforward`;
    entry.ready = (async () => {
      const conn = await this.api.requestOptions();
      const ws = await dialTunnel(this.api.url(path, 'ws'), conn, this.options.connectTimeoutMs).catch(async (err: unknown) => {
        const fresh = err instanceof TunnelRefusal && err.status === 401 ? await this.api.renewedAfter401(conn) : undefined;
        if (!fresh) throw err;
        return dialTunnel(this.api.url(path, 'ws'), fresh, this.options.connectTimeoutMs);
      });
      this.api.accepted();
      const tunnel = new PodTunnel(ws, {
        pod: key,
        keepalive: this.options.keepalive,
        onUnanswered: (silentMs) => {
          this.log.warn({ target: key, transport: 'spdy', silentMs }, 'port-forward tunnel stopped answering pings; closing it');
          this.options.onDeadTunnel?.();
        },
        onClosed: (_t, err) => this.closedTunnel(key, entry, err),
        // Streams wait for replies that do not come: a path gone silent is found in seconds, not
        // at the keepalive's next miss (up to 25 s), and those streams open on a new tunnel.
        onSlowReplies: () => this.checkSlow(entry),
      });
      entry.tunnel = tunnel;
      entry.openedAt = monotonicMs();
      if (this.closed || entry.dead) {
        tunnel.shutdown();
        throw new UpstreamApiError('the proxy is shutting down');
      }
      this.log.info({ pod: key, transport: 'spdy', ...this.figures(key) }, 'tunnel opened');
      return tunnel;
    })();
    entry.ready.catch((err: unknown) => {
      entry.dead = true;
      this.forget(key, entry);
      if (err instanceof TunnelRefusal && err.status === 401) this.api.invalidate();
    });
    return entry;
  }

  /** No new streams; the tunnel closes (GOAWAY). With `failWith`, its open streams fail with it rather than end. */
  private shutdown(entry: TunnelEntry, why?: string, failWith?: Error): void {
    entry.dead = true;
    clearTimeout(entry.idleTimer);
    if (entry.tunnel) {
      if (why) this.log.debug({ why }, 'closing tunnel');
      if (failWith) entry.tunnel.abandon(failWith);
      else entry.tunnel.shutdown();
    }
  }

  private closedTunnel(key: string, entry: TunnelEntry, err?: Error): void {
    entry.dead = true;
    clearTimeout(entry.idleTimer);
    this.forget(key, entry);
    const fields = { pod: key, transport: 'spdy', ...this.figures(key), ...(err ? { error: errorMessage(err) } : {}) };
    // A server that floods the tunnel with PINGs it does not read the answers to (owed-replies.ts).
    if (err instanceof SpdyFloodError) this.log.warn(fields, 'port-forward tunnel flooded with PINGs; closed it');
    else this.log.info(fields, 'tunnel closed');
  }

  private forget(key: string, entry: TunnelEntry): void {
    const list = this.pods.get(key);
    if (!list) return;
    const i = list.indexOf(entry);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.pods.delete(key);
  }

  /** Open tunnels to the pod and the streams on them (what `ss` shows and clients hold). */
  private figures(key: string): { tunnels: number; streams: number } {
    const open = (this.pods.get(key) ?? []).filter((e) => e.tunnel && !e.dead);
    return { tunnels: open.length, streams: open.reduce((n, e) => n + e.streams, 0) };
  }

  private connectError(target: PodPort, err: unknown, signal: AbortSignal): ProxyError {
    const pod = `${target.namespace}/${target.pod}`;
    if (signal.aborted) {
      // It may never have been asked for: its credentials did not come.
      const waiting = this.api.credentialProblem;
      const why = waiting?.waiting ? `: ${waiting.message}` : '';
      return new ConnectTimeoutError(`port-forward tunnel to ${pod} did not open in time${why}`, { cause: signal.reason });
    }
    if (err instanceof TunnelRefusal) {
      const { detail, fromFront } = err.status === 101 ? { detail: err.message, fromFront: false } : upgradeRefusalDetail(err.status, err.body, err.location);
      const dropped = upgradeDropped(target, err.status, detail, err);
      if (dropped) return dropped;
      const msg = `port-forward tunnel to ${pod} refused${fromFront ? '' : ' by the API server'} (${err.status}): ${detail}`;
      if (err.status === 403) return upgradeForbidden(msg, target, err, fromFront);
      // The target is fine; the cluster cannot carry this transport (`auto` falls back instead).
      if (err.meansNoTunnel)
        return new UpstreamApiError(`${msg}; this API server does not offer the SPDY port-forward tunnel: use --transport auto or websocket`, {
          cause: err,
        });
      if (err.status === 404 || err.status === 400) return new HostUnreachableError(msg, { cause: err, retryable: true });
      return new UpstreamApiError(msg, { cause: err, retryable: err.status >= 500 });
    }
    if (err instanceof UpstreamApiError) return err;
    return new UpstreamApiError(`port-forward tunnel to ${pod} failed: ${errorMessage(err)}`, { cause: err, retryable: true });
  }
}
