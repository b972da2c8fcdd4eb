// An https.Agent whose connections come from a dial function instead of the network: what a
// cluster route reaching its API server through another route (`via`: an SSH chain's
// direct-tcpip channel, SshRoute.dial) needs. TLS runs over the dialled Duplex with the
// kubeconfig's options, so verification is the same as on a direct connection. Node's agent
// accepts a createConnection that answers through its callback (lib/_http_agent.js createSocket).
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';

export type DialFunction = (host: string, port: number, signal: AbortSignal) => Promise<Duplex>;

const DIAL_TIMEOUT_MS = 30_000;

/** `secure: false` for an http:// server: the dialled stream is the connection. */
export function agentThrough(dial: DialFunction, options: https.AgentOptions, secure = true): http.Agent {
  // No keep-alive, like the agent client-node makes: ApiConnection makes a new agent each minute.
  const agent = secure ? new https.Agent(options) : new http.Agent();
  type Callback = (err: Error | null, socket?: Duplex) => void;
  (agent as unknown as { createConnection: (o: tls.ConnectionOptions & { host: string; port: number }, cb: Callback) => undefined }).createConnection = (
    o,
    cb,
  ) => {
    dial(o.host, Number(o.port), AbortSignal.timeout(DIAL_TIMEOUT_MS)).then(
      (stream) => {
        if (!secure) return cb(null, stream);
        const socket = tls.connect({ ...o, socket: stream, servername: o.servername ?? (isIpLiteral(o.host) ? undefined : o.host) });
        cb(null, socket);
      },
      (err: Error) => cb(err),
    );
    return undefined;
  };
  return agent;
}

function isIpLiteral(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(':');
}
