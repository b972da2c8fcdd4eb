// Options for every port-forward WebSocket we open to the API server (both transports).
//
// Masking (RFC 6455 §5.3, §10.3): a client must mask its frames with an unpredictable key so an
// intermediary that does not understand WebSocket cannot be made to read attacker-chosen payload
// (a browser page writes whatever it likes into our streams) as HTTP and poison a cache. When
// TLS to the API server is verified against the kubeconfig's CA, no intermediary can read the
// frames at all, and an all-zero key lets `ws` (and the server) skip the XOR pass and a copy of
// every message — a fifth of the proxy's CPU in a bulk transfer. So: zero key over verified TLS
// only; random keys over plain `http://`, with insecure-skip-tls-verify, and when an extra CA is
// trusted (--extra-ca: a corporate proxy that intercepts TLS sits in the path by design).
import type WebSocket from 'ws';
import type { ApiRequestOptions } from '../cluster/api.js';

/** Whether our frames can be seen by anything but the API server. */
export function framesVisibleOnPath(url: URL, conn: ApiRequestOptions): boolean {
  return url.protocol !== 'wss:' || conn.rejectUnauthorized === false || conn.tlsMayBeIntercepted === true;
}

type Options = NonNullable<ConstructorParameters<typeof WebSocket>[2]>;

export function webSocketOptions(url: URL, conn: ApiRequestOptions, extra: { headers?: Options['headers']; handshakeTimeout?: number } = {}): Options {
  return {
    ...conn,
    perMessageDeflate: false,
    followRedirects: false,
    ...extra,
    ...(framesVisibleOnPath(url, conn) ? {} : { generateMask: (mask: Buffer) => void mask.fill(0) }),
  };
}
