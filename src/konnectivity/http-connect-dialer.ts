// http-connect mode: apiserver-network-proxy's HTTP CONNECT frontend (pkg/server/tunnel.go
// Tunnel.ServeHTTP). We send `CONNECT ip:port HTTP/1.1` over mutual TLS (or a unix socket); the
// server answers "200 Connection Established" once its agent has dialled, and raw bytes follow
// on the same connection. A failed dial is an HTTP error answer whose body is the agent's error
// text, after which the server closes the connection (errors.ts reads it).
//
// Half-close: when our side of the connection ends, the server sends CLOSE_REQ and the agent
// closes the whole far connection, so an answer still on its way would be lost. As in grpc mode,
// the client's FIN is therefore held (grpc-dialer.ts explains); the server's close ends both.
import net from 'node:net';
import tls from 'node:tls';
import { Duplex } from 'node:stream';
import { UpstreamApiError } from '../core/errors.js';
import { connectAnswerError, serverError } from './errors.js';
import { type ServerAddress, type TlsMaterial } from './options.js';
import { formatHostPort } from '../core/address.js';
import { ConnectTimeoutError } from '../core/errors.js';

const MAX_HEAD = 16 * 1024;
const MAX_ERROR_BODY = 4 * 1024;
/** How long we wait for the rest of an error body after the status line. */
const ERROR_BODY_MS = 1_000;

export interface HttpConnectDialerOptions {
  address: ServerAddress;
  tls: TlsMaterial;
  label: string;
}

export class HttpConnectDialer {
  constructor(private readonly options: HttpConnectDialerOptions) {}

  dial(ip: string, port: number, signal: AbortSignal): Promise<Duplex> {
    const target = formatHostPort(ip, port);
    const { address: a, tls: t, label } = this.options;
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(abortError(signal, target));
      const socket: net.Socket =
        a.kind === 'unix'
          ? net.connect({ path: a.path })
          : tls.connect({
              host: a.host,
              port: a.port,
              ca: t.ca,
              cert: t.cert,
              key: t.key,
              servername: net.isIP(a.host) ? undefined : a.host,
              ALPNProtocols: ['http/1.1'],
            });
      let head = Buffer.alloc(0);
      let settled = false;
      const finish = (err?: Error) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        socket.off('data', onData);
        socket.off('error', onError);
        socket.off('close', onClose);
        if (err) {
          socket.on('error', () => {});
          socket.destroy();
          reject(err);
        }
      };
      const onAbort = () => finish(abortError(signal, target));
      const onError = (err: Error) => finish(serverError(label, err, target));
      const onClose = () => finish(new UpstreamApiError(`konnectivity server ${label} closed the connection before answering CONNECT ${target}`));
      const onData = (chunk: Buffer) => {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) {
          if (head.length > MAX_HEAD) finish(new UpstreamApiError(`konnectivity server ${label} sent an over-long answer to CONNECT`));
          return;
        }
        const statusLine = head.subarray(0, head.indexOf('\r\n')).toString('latin1');
        const m = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
        const rest = head.subarray(end + 4);
        if (!m) return finish(new UpstreamApiError(`konnectivity server ${label} did not answer CONNECT with HTTP`));
        const status = Number(m[1]);
        if (status === 200) {
          finish();
          socket.pause();
          if (rest.length) socket.unshift(rest);
          socket.setNoDelay?.(true);
          return resolve(new HeldOpen(socket, label, target));
        }
        // An error answer: collect its body (the agent's dial error) until close, a cap or a short wait.
        settled = true;
        signal.removeEventListener('abort', onAbort);
        socket.off('data', onData);
        socket.off('close', onClose);
        let body = rest;
        const done = () => {
          clearTimeout(timer);
          socket.destroy();
          reject(connectAnswerError(status, body.subarray(0, MAX_ERROR_BODY).toString('utf8'), target));
        };
        const timer = setTimeout(done, ERROR_BODY_MS);
        socket.on('data', (c: Buffer) => {
          body = Buffer.concat([body, c]);
          if (body.length >= MAX_ERROR_BODY) done();
        });
        socket.once('close', done);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      socket.on('data', onData);
      socket.on('error', onError);
      socket.on('close', onClose);
      socket.once(a.kind === 'unix' ? 'connect' : 'secureConnect', () => {
        socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nUser-Agent: kubectl-proxyout\r\n\r\n`);
      });
    });
  }

  close(): void {}
}

function abortError(signal: AbortSignal, target: string): ConnectTimeoutError {
  const reason: unknown = signal.reason;
  const timedOut = reason instanceof Error && reason.name === 'TimeoutError';
  return new ConnectTimeoutError(`connecting to ${target} through konnectivity ${timedOut ? 'timed out' : 'was abandoned'}`, { cause: reason });
}

/** The tunnelled connection, with the client's FIN held until the server closes (see the header). */
class HeldOpen extends Duplex {
  private remoteEnded = false;

  constructor(
    private readonly socket: net.Socket,
    private readonly label: string,
    private readonly target: string,
  ) {
    super({ allowHalfOpen: true });
    socket.on('data', (d: Buffer) => {
      if (!this.push(d)) socket.pause();
    });
    socket.on('end', () => {
      this.remoteEnded = true;
      this.push(null);
      socket.end();
    });
    socket.on('error', (err: Error) => this.destroy(serverError(label, err, target)));
    socket.on('close', () => {
      if (!this.remoteEnded) this.destroy(new UpstreamApiError(`konnectivity server ${label} dropped the connection to ${target}`));
    });
  }

  override _read(): void {
    this.socket.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.remoteEnded) return callback();
    if (this.socket.write(chunk)) return callback();
    const go = () => {
      this.socket.off('drain', go);
      this.socket.off('close', go);
      callback();
    };
    this.socket.on('drain', go);
    this.socket.on('close', go);
  }

  override _final(callback: (error?: Error | null) => void): void {
    callback();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.socket.destroy();
    callback(err);
  }

  override toString(): string {
    return `konnectivity ${this.label} → ${this.target}`;
  }
}
