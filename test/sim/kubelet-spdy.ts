// SPDY/3.1 pod port-forward, as the API server + kubelet + container runtime serve it, both ways in:
//  - tunnelled: a WebSocket offering "SPDY/3.1+portforward.k8s.io" (kubectl >= 1.31 tries this
//    first): staging/src/k8s.io/apiserver/pkg/util/proxy/streamtunnel.go turns it into the SPDY
//    POST to the kubelet and, on the kubelet's 101, upgrades the WebSocket with that subprotocol;
//    any other kubelet answer passes through. `tunnel = false` makes a 1.29-like server, where the
//    WebSocket goes to the kubelet's v4 handler instead (400 `query parameter "port" is required`).
//  - plain: `POST` with `Connection: Upgrade`, `Upgrade: SPDY/3.1`, `X-Stream-Protocol-Version`
//    (apimachinery pkg/util/httpstream/{httpstream.go Handshake, spdy/upgrade.go}).
// What happens inside a session (streams, pairs, dialling the pod) is kubelet-spdy-session.ts.
import { appendFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { notScheduled, parsePortsQuery, writeKubeletText, writeRawStatus, type KubeletDeps, type PodRuntimeView } from './kubelet-portforward.js';
import type { ApiError } from './status.js';
import { encodePing, type Headers } from '../../src/tunnel/spdy/framer.js';
import { ServerWire, SocketWire, TUNNEL_MESSAGE_MAX, WebSocketWire } from './spdy-wire.js';
import { PodSession } from './kubelet-spdy-session.js';

export const TUNNEL_PREFIX = 'SPDY/3.1+';
export const PORT_FORWARD_PROTOCOL = 'portforward.k8s.io';

/**
 * Frames a failed pair ends with. 'containerd' (default): FIN on the data stream, the error text,
 * RST on the error stream — what a containerd node sends for a refused dial. 'text-first': text,
 * then FIN on both. 'text-then-rst': text, then RST on both. 'rst-only': RST on both, no text.
 * 'goaway': GOAWAY and the connection closes while the pair is open.
 */
export type SpdyFailureFrames = 'containerd' | 'text-first' | 'text-then-rst' | 'rst-only' | 'goaway';

export interface SpdyKubeletDeps extends KubeletDeps {
  streamCreationTimeoutMs(): number;
  failureFrames(): SpdyFailureFrames;
  /** Headers for every SYN_REPLY: the kubelet sends none; tests set some to have Go clients decode our header compression. */
  replyHeaders(): Headers;
}

const offered = (req: IncomingMessage): string[] =>
  String(req.headers['sec-websocket-protocol'] ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);

/** wsstream.IsWebSocketRequestWithTunnelingProtocol */
function isTunnelRequest(req: IncomingMessage): boolean {
  return String(req.headers.upgrade ?? '').toLowerCase() === 'websocket' && offered(req).some((p) => p.startsWith(TUNNEL_PREFIX) && p.endsWith('.k8s.io'));
}

function isSpdyUpgrade(req: IncomingMessage): boolean {
  return /spdy\/3\.1/i.test(String(req.headers.upgrade ?? ''));
}

export class KubeletSpdyPortForward {
  /** false: a server without the WebSocket tunnel (Kubernetes ≤ 1.29, or the feature gate off). */
  tunnel = true;
  /** Extension: the largest tunnel message (one TLS record, 16 KiB, per read of the kubelet's connection); tests cut smaller. */
  tunnelMessageMax = TUNNEL_MESSAGE_MAX;
  // `ws` refuses "SPDY/3.1+…" as a subprotocol ("/" is not a token character), where gorilla/
  // websocket takes it: the header is taken off the request before the handshake and the chosen
  // protocol written into the 101 ourselves.
  private readonly wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, clientTracking: false });
  private readonly sessions = new Set<PodSession>();
  /** Extension: GOAWAY frames received from clients. */
  goAways = 0;

  constructor(private readonly deps: SpdyKubeletDeps) {
    this.wss.on('headers', (headers: string[], req: IncomingMessage & { spdyTunnelProtocol?: string }) => {
      if (req.spdyTunnelProtocol) headers.push(`Sec-WebSocket-Protocol: ${req.spdyTunnelProtocol}`);
    });
  }

  /** Sessions open now (of one pod when named). */
  sessionsOf(namespace?: string, name?: string): number {
    return this.matching(namespace, name).length;
  }

  get openSessions(): number {
    return this.sessions.size;
  }

  /** Stream pairs open in all sessions. */
  get openPairs(): number {
    let n = 0;
    for (const s of this.sessions) n += s.pairCount;
    return n;
  }

  /** Takes the upgrade if it is SPDY (plain, or tunnelled while `tunnel` is on); false otherwise. */
  handle(req: IncomingMessage, socket: Duplex, head: Buffer, namespace: string, podName: string, query: URLSearchParams): boolean {
    const tunnelled = this.tunnel && isTunnelRequest(req);
    if (!tunnelled && !isSpdyUpgrade(req)) return false;
    socket.on('error', () => {});
    try {
      parsePortsQuery(query.getAll('ports'));
    } catch (e) {
      writeRawStatus(socket, e as ApiError);
      return true;
    }
    const pod = this.deps.lookupPod(namespace, podName);
    if (!pod) return (writeRawStatus(socket, this.deps.notFound(podName)), true);
    if (!pod.scheduled) return (writeRawStatus(socket, notScheduled(podName)), true);
    if (!pod.running) return (writeKubeletText(socket, 500, `pod not found (${JSON.stringify(`${pod.name}_${pod.namespace}`)})`), true);
    // The kubelet's httpstream.Handshake over X-Stream-Protocol-Version (the tunnel strips the prefix).
    const versions = tunnelled
      ? offered(req)
          .filter((p) => p.startsWith(TUNNEL_PREFIX))
          .map((p) => p.slice(TUNNEL_PREFIX.length))
      : String(req.headers['x-stream-protocol-version'] ?? '')
          .split(',')
          .map((p) => p.trim())
          .filter(Boolean);
    if (versions.length === 0) return (writeKubeletText(socket, 500, 'unable to upgrade: X-Stream-Protocol-Version is required'), true);
    if (!versions.includes(PORT_FORWARD_PROTOCOL)) {
      return (
        writeKubeletText(
          socket,
          403,
          `unable to upgrade: unable to negotiate protocol: client supports [${versions.join(' ')}], server accepts [${PORT_FORWARD_PROTOCOL}]`,
        ),
        true
      );
    }
    if (tunnelled) {
      // gorilla's Upgrader picks the first offered protocol the server lists; here only one.
      const chosen = offered(req).find((p) => p === TUNNEL_PREFIX + PORT_FORWARD_PROTOCOL);
      delete req.headers['sec-websocket-protocol'];
      Object.assign(req, { spdyTunnelProtocol: chosen });
      this.wss.handleUpgrade(req, socket, head, (ws) => this.start(new WebSocketWire(ws, this.tunnelMessageMax), pod));
      return true;
    }
    if (!/upgrade/i.test(String(req.headers.connection ?? ''))) {
      return (writeKubeletText(socket, 400, 'unable to upgrade: missing upgrade headers in request'), true);
    }
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: ${PORT_FORWARD_PROTOCOL}\r\nDate: ${new Date().toUTCString()}\r\n\r\n`,
    );
    this.start(new SocketWire(socket), pod, head);
    return true;
  }

  private start(wire: ServerWire, pod: PodRuntimeView, head?: Buffer): void {
    const capture = process.env.SIM_SPDY_CAPTURE;
    if (capture) {
      wire.onBytes = (b) => {
        try {
          appendFileSync(capture, `${b.toString('hex')}\n`);
        } catch {
          // The capturing test is over and took its file away; the session outlived it.
        }
      };
    }
    const s: PodSession = new PodSession(
      wire,
      pod,
      this.deps,
      head,
      () => this.sessions.delete(s),
      () => this.goAways++,
    );
    this.sessions.add(s);
  }

  /** Sessions of one namespace, one pod, or all. */
  private matching(namespace?: string, name?: string): PodSession[] {
    return [...this.sessions].filter((s) => (namespace === undefined || s.pod.namespace === namespace) && (name === undefined || s.pod.name === name));
  }

  /** Pod deleted: its sessions end at once. */
  closePod(namespace: string, name: string): void {
    for (const s of [...this.sessions]) if (s.pod.namespace === namespace && s.pod.name === name) s.session.destroy();
  }

  /** Extension: cut the connections of matching sessions without a goodbye (a broken tunnel). */
  killSessions(namespace?: string, name?: string): number {
    const hit = this.matching(namespace, name);
    for (const s of hit) s.wire.kill();
    return hit.length;
  }

  /**
   * Extension: matching sessions go away as spdystream's Connection.Close does (kubelet-spdy-session.ts),
   * now or (`atNextStream`) right before each one's next SYN_STREAM arrives; returns how many.
   */
  goAwaySessions(namespace?: string, name?: string, atNextStream = false): number {
    const hit = this.matching(namespace, name);
    for (const s of hit) s.goAway(atNextStream);
    return hit.length;
  }

  /**
   * Extension: matching sessions send PINGs as fast as their connection takes them (at most 1 MiB
   * queued here) until they end, and stop reading — a broken or hostile server that never reads
   * the echoes. Returns how many sessions.
   */
  floodPings(namespace?: string, name?: string): number {
    const hit = this.matching(namespace, name);
    for (const s of hit) {
      s.wire.pause();
      let id = 2;
      const burst = (): void => {
        if (s.session.closed) return;
        if (s.wire.buffered < 1 << 20) {
          const pings: Buffer[] = [];
          for (let i = 0; i < 4096; i++, id = id >= 0x7ffffffe ? 2 : id + 2) pings.push(encodePing(id));
          s.wire.write(Buffer.concat(pings));
          setImmediate(burst);
        } else setTimeout(burst, 1);
      };
      burst();
    }
    return hit.length;
  }

  /** Extension: matching sessions stop reading and answering (a path that silently died); returns how many. */
  freezeSessions(namespace?: string, name?: string): number {
    const hit = this.matching(namespace, name);
    for (const s of hit) s.wire.pause();
    return hit.length;
  }

  /** Extension: every session's pairs waiting out the close grace end now; returns how many. */
  endLingering(): number {
    let n = 0;
    for (const s of this.sessions) n += s.endLingering();
    return n;
  }

  closeAll(): void {
    for (const s of [...this.sessions]) s.wire.kill();
    this.sessions.clear();
  }
}
