// grpc mode: the konnectivity-client protocol (apiserver-network-proxy
// konnectivity-client/pkg/client/client.go, conn.go). One gRPC channel (one HTTP/2 connection,
// reconnected by grpc-js when it drops) per server, and one ProxyService.Proxy bidirectional
// stream per TCP connection, as upstream's reusable tunnel does: DIAL_REQ → DIAL_RSP, then DATA
// both ways, then CLOSE_REQ → CLOSE_RSP.
//
// What the protocol does not allow, and what we do instead:
//  - No half-close. The server closes the whole far connection on CLOSE_REQ or when the gRPC
//    stream ends (pkg/server/server.go serveRecvFrontend), and the agent ends the whole
//    connection with CLOSE_RSP when the far end sends FIN (pkg/agent/client.go
//    remoteToSendChannel). So a client's FIN is held, not forwarded: the stream stays open for
//    the answer until the far end closes (CLOSE_RSP) or the client goes away (the relay resets a
//    half-closed stream that stays quiet; listeners/relay.ts). The far end's FIN arrives as
//    CLOSE_RSP and ends our readable side; what the client writes after that is dropped.
//  - No flow control of its own ("TODO: flow control" upstream): we rely on gRPC/HTTP/2's. We
//    stop reading the gRPC stream while our reader is full, and wait for the gRPC stream to
//    drain before taking more from the writer, so neither side buffers without bound.
import { randomBytes } from 'node:crypto';
import { Duplex } from 'node:stream';
import grpc from '@grpc/grpc-js';
import { ConnectTimeoutError, UpstreamApiError } from '../core/errors.js';
import { decodePacket, encodePacket, newDialId, PROXY_METHOD, type Packet } from './packet.js';
import { formatHostPort } from '../core/address.js';
import { dialFailure, serverError } from './errors.js';
import type { ServerAddress, TlsMaterial } from './options.js';

/** Larger writes are cut into DATA packets of this size (upstream's agent reads 4 KiB, the server 32 KiB). */
const MAX_DATA = 32 * 1024;
/** After CLOSE_REQ (or giving up a dial) the server has this long to end the stream before we cancel it. */
const CLOSE_GRACE_MS = 5_000;

type ProxyCall = grpc.ClientDuplexStream<Packet, Packet>;

export interface GrpcDialerOptions {
  address: ServerAddress;
  tls: TlsMaterial;
  /** Shown in messages: the server as configured. */
  label: string;
}

/** One gRPC channel (its own HTTP/2 connection) and the Proxy streams open on it. */
interface Channel {
  client: grpc.Client;
  calls: number;
  /** A newer channel takes the dials; this one closes once its streams have ended. */
  retired: boolean;
}

export class GrpcDialer {
  private channel: Channel;
  private readonly channels = new Set<Channel>();

  constructor(private readonly options: GrpcDialerOptions) {
    this.channel = this.openChannel();
  }

  private openChannel(): Channel {
    const a = this.options.address;
    const target = a.kind === 'unix' ? `unix://${a.path}` : `${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}`;
    const credentials =
      a.kind === 'unix'
        ? grpc.credentials.createInsecure()
        : grpc.credentials.createSsl(this.options.tls.ca ?? null, this.options.tls.key ?? null, this.options.tls.cert ?? null);
    const client = new grpc.Client(target, credentials, {
      // A restarted server is found again quickly.
      'grpc.initial_reconnect_backoff_ms': 250,
      'grpc.max_reconnect_backoff_ms': 5_000,
      // Keepalive notices a dead path, but upstream's frontend sets no enforcement policy
      // (cmd/server/app/server.go), so Go's default applies: pings less than 5 minutes apart
      // earn strikes and a GOAWAY "too_many_pings" that would end every stream. Stay above it.
      'grpc.keepalive_time_ms': 330_000,
      'grpc.keepalive_timeout_ms': 20_000,
      'grpc.primary_user_agent': 'kubectl-proxyout',
      // A channel made to replace one on a dead path must not share its connection (grpc-js
      // pools subchannels process-wide by target and options).
      'grpc.use_local_subchannel_pool': 1,
    });
    const channel = { client, calls: 0, retired: false };
    this.channels.add(channel);
    return channel;
  }

  /**
   * After a pause (core/pause-detector.ts) the HTTP/2 connection may be dead without a sign, and
   * the keepalive takes almost 6 minutes to notice: new dials go to a new connection; the old one
   * closes once its streams, which go on as long as it carries them, have ended.
   */
  afterPause(): void {
    this.replace(this.channel);
  }

  /**
   * A dial the server never answered within the connect timeout: its connection may be a dead
   * path (a NAT or load balancer that forgot it; keepalive would notice only after minutes), so
   * the next dials go over a new connection, as upstream's client dials each tunnel anew.
   */
  private replace(channel: Channel): void {
    if (channel !== this.channel || channel.retired) return;
    this.retire(channel);
    this.channel = this.openChannel();
  }

  private retire(channel: Channel): void {
    channel.retired = true;
    if (channel.calls === 0) {
      this.channels.delete(channel);
      channel.client.close();
    }
  }

  dial(ip: string, port: number, signal: AbortSignal): Promise<Duplex> {
    const target = formatHostPort(ip, port);
    const label = this.options.label;
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(abortError(signal, target));
      const random = newDialId(randomBytes);
      const channel = this.channel;
      const call: ProxyCall = channel.client.makeBidiStreamRequest(PROXY_METHOD, encodePacket, decodePacket, new grpc.Metadata());
      channel.calls++;
      call.once('status', () => {
        channel.calls--;
        if (channel.retired && channel.calls === 0) this.retire(channel);
      });
      let settled = false;
      const detach = () => {
        settled = true;
        signal.removeEventListener('abort', onAbort);
        call.off('data', onData);
        call.off('end', onEnd);
        call.off('error', onError);
      };
      const fail = (err: Error, cancel: boolean) => {
        if (settled) return;
        detach();
        call.on('error', () => {});
        if (cancel) call.cancel();
        else endWithin(call, CLOSE_GRACE_MS);
        reject(err);
      };
      const onAbort = () => {
        if (settled) return;
        // Upstream's client gives up a pending dial with DIAL_CLS, then ends the stream.
        call.write({ type: 'DIAL_CLS', random });
        const err = abortError(signal, target);
        if (timedOut(signal)) this.replace(channel);
        fail(err, false);
      };
      const onData = (p: Packet) => {
        if (p.type === 'DIAL_RSP' && p.random === random) {
          if (p.error) return fail(dialFailure(p.error, target), false);
          detach();
          resolve(new KonnectivityStream(call, p.connectID, target, label));
        } else if (p.type === 'DIAL_CLS' && p.random === random) {
          fail(dialFailure('dial closed', target), false);
        }
      };
      const onEnd = () => fail(new UpstreamApiError(`konnectivity server ${label} ended the stream before answering the dial to ${target}`), true);
      const onError = (err: Error) => fail(serverError(label, err, target), true);
      signal.addEventListener('abort', onAbort, { once: true });
      call.on('data', onData);
      call.on('end', onEnd);
      call.on('error', onError);
      call.write({ type: 'DIAL_REQ', protocol: 'tcp', address: target, random });
    });
  }

  close(): void {
    for (const channel of this.channels) channel.client.close();
    this.channels.clear();
  }
}

function timedOut(signal: AbortSignal): boolean {
  const reason: unknown = signal.reason;
  return reason instanceof Error && reason.name === 'TimeoutError';
}

function abortError(signal: AbortSignal, target: string): ConnectTimeoutError {
  return new ConnectTimeoutError(`connecting to ${target} through konnectivity ${timedOut(signal) ? 'timed out' : 'was abandoned'}`, { cause: signal.reason });
}

/** Half-closes the gRPC stream; cancels it if the server has not finished it within `ms`. */
function endWithin(call: ProxyCall, ms: number): void {
  let done = false;
  call.once('status', () => (done = true));
  call.on('error', () => {});
  call.resume(); // read (and drop) whatever still comes, so the stream can finish
  call.end();
  setTimeout(() => {
    if (!done) call.cancel();
  }, ms).unref();
}

/** One dialled connection over its own Proxy stream. */
class KonnectivityStream extends Duplex {
  private remoteClosed = false;
  private ended = false;

  constructor(
    private readonly call: ProxyCall,
    private readonly connectID: bigint,
    private readonly target: string,
    private readonly label: string,
  ) {
    super({ allowHalfOpen: true });
    call.on('data', (p: Packet) => this.onPacket(p));
    call.on('error', (err: Error) => {
      if (!this.remoteClosed) this.destroy(serverError(label, err, target));
    });
    // The server ended the stream without CLOSE_RSP: upstream's client reads that as EOF too.
    call.on('end', () => this.remoteEnd());
    call.pause();
  }

  private onPacket(p: Packet): void {
    if (this.remoteClosed || this.destroyed) return;
    if (p.type === 'DATA' && p.connectID === this.connectID) {
      if (p.data.length > 0 && !this.push(p.data)) this.call.pause();
    } else if (p.type === 'CLOSE_RSP' && p.connectID === this.connectID) {
      this.remoteEnd();
    }
  }

  private remoteEnd(): void {
    if (this.remoteClosed) return;
    this.remoteClosed = true;
    this.push(null);
    this.finishCall();
  }

  /** The far connection is gone: end our side of the gRPC stream (once). */
  private finishCall(): void {
    if (this.ended) return;
    this.ended = true;
    endWithin(this.call, CLOSE_GRACE_MS);
  }

  override _read(): void {
    if (!this.remoteClosed) this.call.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.remoteClosed) return callback(); // the far end is gone; like TCP, bytes after its close are lost
    let ok = true;
    for (let off = 0; off < chunk.length; off += MAX_DATA) {
      ok = this.call.write({ type: 'DATA', connectID: this.connectID, data: chunk.subarray(off, off + MAX_DATA), error: '' });
    }
    if (ok) return callback();
    const onDrain = () => {
      this.call.off('close', onDrain);
      callback();
    };
    this.call.once('drain', onDrain);
    this.call.once('close', onDrain);
  }

  /** The client's FIN: konnectivity cannot carry it, so the connection stays open (see the header). */
  override _final(callback: (error?: Error | null) => void): void {
    callback();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    if (!this.remoteClosed && !this.ended) {
      this.call.write({ type: 'CLOSE_REQ', connectID: this.connectID });
    }
    this.finishCall();
    callback(err);
  }

  override toString(): string {
    return `konnectivity ${this.label} → ${this.target}`;
  }
}
