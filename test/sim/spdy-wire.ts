// The byte pipes a simulated SPDY port-forward session runs over: a WebSocket carrying the SPDY
// byte stream in binary messages (the API server's tunnel, staging/src/k8s.io/apiserver/pkg/util/
// proxy/streamtunnel.go + client-go tools/portforward/tunneling_connection.go: message boundaries
// mean nothing, a non-binary message is an error, close 1000 is EOF), or the upgraded TCP/TLS
// socket itself (plain SPDY). Frames written in one tick leave in one message/write.
import type { Duplex } from 'node:stream';
import type { WebSocket, RawData } from 'ws';
import type { SessionWire, SpdySession } from '../../src/tunnel/spdy/session.js';

export const HIGH_WATER = 1 << 20;
/**
 * The largest message the API server's tunnel sends: io.Copy's buffer is 32 KiB, but each read of
 * the kubelet's TLS connection returns at most one record (Go crypto/tls conn.go Read), ≤ 16 KiB.
 */
export const TUNNEL_MESSAGE_MAX = 16 * 1024;
export const LOW_WATER = 256 * 1024;

export abstract class ServerWire implements SessionWire {
  protected session?: SpdySession;
  private receive?: (bytes: Buffer) => void;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private scheduled = false;
  private high = false;
  protected ended = false;
  /** Called when the bytes queued towards the client drop below LOW_WATER after exceeding HIGH_WATER. */
  onDrain?: () => void;
  /** Extension: every byte received, for captures (SIM_SPDY_CAPTURE). */
  onBytes?: (bytes: Buffer) => void;

  /** Bytes received go to `receive` (by default the session's own). */
  attach(session: SpdySession, head?: Buffer, receive: (bytes: Buffer) => void = (b) => session.receive(b)): void {
    this.session = session;
    this.receive = receive;
    if (head && head.length) this.deliver(head);
  }

  get buffered(): number {
    return this.pendingBytes + this.queued();
  }

  write(bytes: Buffer): void {
    if (this.ended) return;
    this.pending.push(bytes);
    this.pendingBytes += bytes.length;
    if (this.buffered > HIGH_WATER) this.high = true;
    if (this.scheduled) return;
    this.scheduled = true;
    process.nextTick(() => this.flush());
  }

  close(err?: Error): void {
    if (this.ended) return;
    this.flush();
    this.ended = true;
    this.shut(err !== undefined);
  }

  protected deliver(bytes: Buffer): void {
    this.onBytes?.(bytes);
    this.receive?.(bytes);
  }

  protected sent(): void {
    if (this.high && this.buffered < LOW_WATER) {
      this.high = false;
      this.onDrain?.();
    }
  }

  private flush(): void {
    this.scheduled = false;
    if (this.pending.length === 0 || this.ended) return;
    const data = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    this.send(data);
  }

  abstract pause(): void;
  abstract resume(): void;
  /** Drops the connection without a goodbye (a broken network). */
  abstract kill(): void;
  protected abstract queued(): number;
  protected abstract send(data: Buffer): void;
  protected abstract shut(abrupt: boolean): void;
}

export class WebSocketWire extends ServerWire {
  /** `messageMax`: the largest message sent (TUNNEL_MESSAGE_MAX; tests cut much smaller). */
  constructor(
    private readonly ws: WebSocket,
    private readonly messageMax = TUNNEL_MESSAGE_MAX,
  ) {
    super();
    ws.on('message', (data: RawData, isBinary: boolean) => {
      if (!isBinary) return this.session?.destroy(new Error('invalid message type received'));
      this.deliver(data as Buffer);
    });
    ws.on('close', () => {
      this.ended = true;
      this.session?.destroy();
    });
    ws.on('error', () => {});
  }

  pause(): void {
    this.ws.pause();
  }

  resume(): void {
    this.ws.resume();
  }

  kill(): void {
    this.ended = true;
    this.ws.terminate();
  }

  protected queued(): number {
    return this.ws.bufferedAmount;
  }

  /**
   * The API server relays the kubelet's SPDY connection into the WebSocket with io.Copy
   * (apimachinery util/proxy/upgradeaware.go; tunneling_connection.go writes one binary message
   * per Write): messages of at most one TLS record's 16 KiB, cut wherever a read ended — frames
   * span messages.
   */
  protected send(data: Buffer): void {
    if (this.ws.readyState !== this.ws.OPEN) return;
    for (let off = 0; off < data.length; off += this.messageMax) {
      const last = off + this.messageMax >= data.length;
      this.ws.send(data.subarray(off, off + this.messageMax), { binary: true }, last ? () => this.sent() : undefined);
    }
  }

  protected shut(abrupt: boolean): void {
    if (abrupt) this.ws.terminate();
    else this.ws.close(1000);
  }
}

export class SocketWire extends ServerWire {
  constructor(private readonly socket: Duplex) {
    super();
    socket.on('data', (data: Buffer) => this.deliver(data));
    socket.on('end', () => this.session?.destroy());
    socket.on('close', () => {
      this.ended = true;
      this.session?.destroy();
    });
    socket.on('error', () => {});
  }

  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  kill(): void {
    this.ended = true;
    this.socket.destroy();
  }

  protected queued(): number {
    return this.socket.writableLength;
  }

  protected send(data: Buffer): void {
    if (this.socket.destroyed) return;
    this.socket.write(data, () => this.sent());
  }

  protected shut(abrupt: boolean): void {
    if (abrupt) this.socket.destroy();
    else this.socket.end(() => this.socket.destroy());
  }
}

/**
 * Finds where SYN_STREAM frames begin in a SPDY byte stream cut anywhere: every frame starts with
 * an 8-byte header, control frames with the high bit set and their type in bytes 2–3, the payload
 * length in bytes 5–7 (draft-mbelshe-httpbis-spdy-00 §2.2).
 */
export class SynStreamFinder {
  private readonly header = Buffer.alloc(8);
  private headerBytes = 0;
  private payloadLeft = 0;

  /**
   * Walks all of `chunk`. Returns where in it the first SYN_STREAM whose header completes in it
   * begins (0 when that header began in an earlier chunk), or -1.
   */
  find(chunk: Buffer): number {
    let found = -1;
    let off = 0;
    while (off < chunk.length) {
      if (this.payloadLeft > 0) {
        const n = Math.min(this.payloadLeft, chunk.length - off);
        this.payloadLeft -= n;
        off += n;
        continue;
      }
      const start = Math.max(0, off - this.headerBytes);
      const n = Math.min(8 - this.headerBytes, chunk.length - off);
      chunk.copy(this.header, this.headerBytes, off, off + n);
      this.headerBytes += n;
      off += n;
      if (this.headerBytes < 8) break;
      this.headerBytes = 0;
      this.payloadLeft = this.header.readUIntBE(5, 3);
      if (found < 0 && (this.header[0]! & 0x80) !== 0 && this.header.readUInt16BE(2) === 1) found = start;
    }
    return found;
  }
}
