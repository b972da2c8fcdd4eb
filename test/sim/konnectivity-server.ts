// A simulated apiserver-network-proxy server with its agent folded in: the frontend a konnectivity
// client talks to, in either of upstream's modes, dialling "guest cluster" addresses that only it
// can reach (guest-network.ts maps them onto loopback). It follows upstream's code:
//  - grpc mode: pkg/server/server.go ProxyServer.Proxy / serveRecvFrontend — the first packet is
//    DIAL_REQ; a failed dial is DIAL_RSP{error} and the stream ends; DATA both ways; CLOSE_REQ or
//    the client's end of stream closes the far connection; the far end's FIN comes back as
//    CLOSE_RSP (pkg/agent/client.go remoteToSendChannel → cleanup); DIAL_CLS gives up a dial.
//  - http-connect mode: pkg/server/tunnel.go Tunnel.ServeHTTP — only CONNECT (405 otherwise);
//    "HTTP/1.1 200 Connection Established" then raw bytes; a failed dial is the status of
//    mapDialErrorToHTTPStatus (server.go; or 503 for every error, as servers before it did) with
//    the agent's error text as body, then close; no agent is 500 "currently no tunnels available".
//  - the agent's dial errors are Go net errors ("dial tcp ADDR: connect: connection refused").
//  - TLS as cmd/server/app/server.go getTLSConfig: client certificates required and verified
//    against the CA; a unix socket (--uds-name) speaks plain gRPC or HTTP.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import grpc from '@grpc/grpc-js';
import { decodePacket, encodePacket, PROXY_METHOD, type Packet } from '../../src/konnectivity/packet.js';
import type { GuestResolver } from './guest-network.js';

export interface SimKonnectivityOptions {
  mode: 'grpc' | 'http-connect';
  network: GuestResolver;
  /** Serving key/cert and the CA client certificates must chain to; omit with `uds`. */
  tls?: { keyPem: string; certPem: string; caPem: string };
  /** Listen on this unix socket instead of TCP (plain, like --uds-name). */
  uds?: string;
  /** TCP port (0: any); the same port is kept across restart(). */
  port?: number;
  /** 'legacy': answer 503 to every failed CONNECT (servers before mapDialErrorToHTTPStatus). */
  httpErrors?: 'current' | 'legacy';
}

export interface SimKonnectivityCounters {
  dials: number;
  dialFailures: number;
  open: number;
  closeRequests: number;
  dialCancels: number;
}

const GO_ERRORS = {
  refused: (a: string) => `dial tcp ${a}: connect: connection refused`,
  unreachable: (a: string) => `dial tcp ${a}: connect: no route to host`,
  timeout: (a: string) => `dial tcp ${a}: i/o timeout`,
};

/** mapDialErrorToHTTPStatus in pkg/server/server.go (the parts the agent's errors reach). */
function statusForDialError(text: string): number {
  const t = text.toLowerCase();
  if (t.includes('timeout') || t.includes('deadline exceeded')) return 504;
  if (t.includes('too many open files')) return 503;
  return 502;
}

export class SimKonnectivityServer {
  readonly counters: SimKonnectivityCounters = { dials: 0, dialFailures: 0, open: 0, closeRequests: 0, dialCancels: 0 };
  /** No agent connected: every dial fails as upstream's server says then. */
  noAgent = false;
  private grpcServer?: grpc.Server;
  private httpServer?: http.Server;
  private port = 0;
  private readonly sockets = new Set<net.Socket>();
  private readonly remotes = new Set<net.Socket>();
  private nextConnectId = 0n;
  private readonly hanging = new Set<() => void>();

  private constructor(private readonly options: SimKonnectivityOptions) {
    this.port = options.port ?? 0;
  }

  static async start(options: SimKonnectivityOptions): Promise<SimKonnectivityServer> {
    const s = new SimKonnectivityServer(options);
    await s.listen();
    return s;
  }

  /** What a client's config would say: https://127.0.0.1:PORT or unix:///path. */
  get address(): string {
    return this.options.uds ? `unix://${this.options.uds}` : `https://127.0.0.1:${this.port}`;
  }

  private async listen(): Promise<void> {
    const { uds, tls } = this.options;
    if (uds) fs.rmSync(uds, { force: true });
    if (this.options.mode === 'grpc') {
      const server = new grpc.Server();
      server.addService(
        {
          Proxy: {
            path: PROXY_METHOD,
            requestStream: true,
            responseStream: true,
            requestSerialize: encodePacket,
            requestDeserialize: decodePacket,
            responseSerialize: encodePacket,
            responseDeserialize: decodePacket,
            originalName: 'proxy',
          },
        },
        { Proxy: (call: grpc.ServerDuplexStream<Packet, Packet>) => this.serveProxy(call) },
      );
      const creds =
        uds || !tls
          ? grpc.ServerCredentials.createInsecure()
          : grpc.ServerCredentials.createSsl(Buffer.from(tls.caPem), [{ private_key: Buffer.from(tls.keyPem), cert_chain: Buffer.from(tls.certPem) }], true);
      const bound = await new Promise<number>((resolve, reject) =>
        server.bindAsync(uds ? `unix://${uds}` : `127.0.0.1:${this.port}`, creds, (err, port) => (err ? reject(err) : resolve(port))),
      );
      if (!uds) this.port = bound;
      this.grpcServer = server;
      return;
    }
    const server =
      uds || !tls
        ? http.createServer()
        : https.createServer({ key: tls.keyPem, cert: tls.certPem, ca: tls.caPem, requestCert: true, rejectUnauthorized: true });
    server.on('request', (_req, res) => {
      res.writeHead(405, { 'Content-Type': 'text/plain; charset=utf-8' }).end('this proxy only supports CONNECT passthrough\n');
    });
    server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => void this.serveConnect(req.url ?? '', socket, head));
    server.on(uds || !tls ? 'connection' : 'secureConnection', (s: net.Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      if (uds) server.listen(uds, () => resolve());
      else server.listen(this.port, '127.0.0.1', () => resolve());
    });
    if (!uds) this.port = (server.address() as net.AddressInfo).port;
    this.httpServer = server;
  }

  /** The agent's dial: a connected socket, or the Go error text it would report. */
  private async agentDial(address: string): Promise<net.Socket | string> {
    this.counters.dials++;
    const fail = (text: string) => {
      this.counters.dialFailures++;
      return text;
    };
    if (this.noAgent) return fail('No agent available');
    const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(address);
    if (!m) return fail(`dial tcp ${address}: address ${address}: missing port in address`);
    const outcome = await this.options.network.resolve(m[1]!, Number(m[2]));
    if (outcome === undefined) return fail(GO_ERRORS.unreachable(address));
    if (outcome === 'hang') {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 30_000);
        this.hanging.add(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      return fail(GO_ERRORS.timeout(address));
    }
    if (typeof outcome === 'string') return fail(GO_ERRORS[outcome](address));
    return new Promise((resolve) => {
      const s = net.connect({ host: outcome.host, port: outcome.port, allowHalfOpen: true });
      s.once('connect', () => {
        s.removeAllListeners('error');
        s.on('error', () => {});
        this.remotes.add(s);
        this.counters.open++;
        s.once('close', () => {
          this.remotes.delete(s);
          this.counters.open--;
        });
        resolve(s);
      });
      s.once('error', (err: NodeJS.ErrnoException) =>
        resolve(fail(err.code === 'ECONNREFUSED' ? GO_ERRORS.refused(address) : `dial tcp ${address}: ${err.message}`)),
      );
    });
  }

  private serveProxy(call: grpc.ServerDuplexStream<Packet, Packet>): void {
    let remote: net.Socket | undefined;
    let connectID = 0n;
    let cancelled = false;
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      remote?.destroy();
      call.end();
    };
    call.on('error', () => finish());
    call.on('cancelled', () => finish());
    call.on('end', () => finish()); // the frontend closed its stream: clean the connection
    call.on('data', async (p: Packet) => {
      if (p.type === 'DIAL_REQ' && !remote && connectID === 0n) {
        const result = await this.agentDial(p.address);
        if (finished || cancelled) {
          if (typeof result !== 'string') result.destroy();
          return;
        }
        if (typeof result === 'string') {
          call.write({ type: 'DIAL_RSP', random: p.random, connectID: 0n, error: result });
          return finish(); // "The Dial is failing; no reason to keep this goroutine."
        }
        remote = result;
        connectID = ++this.nextConnectId;
        call.write({ type: 'DIAL_RSP', random: p.random, connectID, error: '' });
        remote.on('data', (data: Buffer) => {
          if (finished) return;
          if (!call.write({ type: 'DATA', connectID, data, error: '' })) {
            remote!.pause();
            call.once('drain', () => remote!.resume());
          }
        });
        // The far end's FIN: the agent closes the connection and says CLOSE_RSP.
        remote.on('end', () => {
          if (!finished) call.write({ type: 'CLOSE_RSP', connectID, error: '' });
          remote!.destroy();
        });
      } else if (p.type === 'DATA' && remote && p.connectID === connectID) {
        if (!remote.write(p.data)) {
          call.pause();
          remote.once('drain', () => call.resume());
        }
      } else if (p.type === 'CLOSE_REQ') {
        this.counters.closeRequests++;
        finish();
      } else if (p.type === 'DIAL_CLS') {
        this.counters.dialCancels++;
        cancelled = true;
      }
    });
  }

  private async serveConnect(target: string, socket: net.Socket, head: Buffer): Promise<void> {
    socket.on('error', () => {});
    if (this.noAgent) {
      this.counters.dials++;
      this.counters.dialFailures++;
      socket.end('HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n\r\ncurrently no tunnels available: No agent available');
      return;
    }
    const result = await this.agentDial(target);
    if (typeof result === 'string') {
      const status = this.options.httpErrors === 'legacy' ? 503 : statusForDialError(result);
      socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n${result}`);
      return;
    }
    const remote = result;
    if (socket.destroyed) return void remote.destroy();
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length) remote.write(head);
    // Far end → client; its FIN closes the client connection (CLOSE_RSP → CloseHTTP).
    remote.pipe(socket);
    // Client → far end; the client's EOF sends CLOSE_REQ: the far connection closes entirely.
    socket.pipe(remote, { end: false });
    socket.on('end', () => {
      remote.destroy();
      socket.end();
    });
    socket.on('close', () => remote.destroy());
    remote.on('close', () => socket.end());
  }

  /** Drops every connection and stream now and stops listening; restart() listens again. */
  async stop(): Promise<void> {
    for (const release of this.hanging) release();
    this.hanging.clear();
    for (const s of this.sockets) s.destroy();
    if (this.grpcServer) {
      this.grpcServer.forceShutdown();
      this.grpcServer = undefined;
    }
    if (this.httpServer) {
      const server = this.httpServer;
      this.httpServer = undefined;
      await new Promise<void>((r) => server.close(() => r()));
    }
    for (const r of this.remotes) r.destroy();
  }

  /** A server restart: everything in flight is cut; after `downMs` it listens again on the same address. */
  async restart(downMs = 100): Promise<void> {
    await this.stop();
    await new Promise((r) => setTimeout(r, downMs));
    await this.listen();
  }
}
