// The konnectivity dialer: dial(ip, port, signal) → a byte stream to that address in the cluster's
// network, through an apiserver-network-proxy server in grpc or http-connect mode. It knows
// nothing of names; routes/konnectivity/streams.ts resolves them through the cluster's watch cache.
// Errors are ProxyErrors (core/errors.ts): refused → SOCKS 0x05, timeout → 0x06, unreachable →
// 0x04, the server itself failing (or having no agent) → 0x01; see errors.ts.
import type { Duplex } from 'node:stream';
import { HttpConnectDialer } from './http-connect-dialer.js';
import { loadTls, parseServerAddress, tlsProblem, type KonnectivitySpec, type KonnectivityMode } from './options.js';
import { isIP } from 'node:net';
import { NotAllowedError, StartupError } from '../core/errors.js';

export interface KonnectivityStats {
  dials: number;
  failures: number;
  open: number;
}

export interface KonnectivityDialer {
  readonly server: string;
  readonly mode: KonnectivityMode;
  /** Rejects with a ProxyError; the stream is destroyed with one when the server or far end fails. */
  dial(ip: string, port: number, signal: AbortSignal): Promise<Duplex>;
  stats(): KonnectivityStats;
  /** Closes the gRPC channel (grpc mode); open streams end with it. */
  close(): void;
  /** After a pause (core/pause-detector.ts): what the dialer keeps open may be dead without a sign. */
  afterPause?(): void;
}

/** Reads the TLS files and makes the dialer; a StartupError names what is wrong. */
export async function createKonnectivityDialer(spec: KonnectivitySpec): Promise<KonnectivityDialer> {
  let address;
  try {
    address = parseServerAddress(spec.server);
    const problem = tlsProblem(spec);
    if (problem) throw new Error(problem);
  } catch (err) {
    throw new StartupError(`konnectivity server ${spec.server}: ${(err as Error).message}`);
  }
  const tls = await loadTls(spec);
  const options = { address, tls, label: spec.server };
  // gRPC mode's modules (@grpc/grpc-js, protobufjs: ~110 CommonJS modules, ~100 ms) load only for
  // a grpc route, not at every start of the proxy.
  const inner = spec.mode === 'grpc' ? new (await import('./grpc-dialer.js')).GrpcDialer(options) : new HttpConnectDialer(options);
  const stats: KonnectivityStats = { dials: 0, failures: 0, open: 0 };
  return {
    server: spec.server,
    mode: spec.mode,
    async dial(ip, port, signal) {
      // Names never go to the server (it would resolve them in the cluster's DNS, past our table).
      if (isIP(ip) === 0) throw new NotAllowedError(`konnectivity dials IP addresses only, not "${ip}"`);
      stats.dials++;
      let stream: Duplex;
      try {
        stream = await inner.dial(ip, port, signal);
      } catch (err) {
        stats.failures++;
        throw err;
      }
      stats.open++;
      stream.once('close', () => stats.open--);
      return stream;
    },
    stats: () => ({ ...stats }),
    close: () => inner.close(),
    afterPause: () => (inner instanceof HttpConnectDialer ? undefined : inner.afterPause()),
  };
}
