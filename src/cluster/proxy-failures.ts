// An egress proxy (kubeconfig proxy-url, HTTPS_PROXY) that fails the API connection before the
// tunnel to the API server exists: it refused the CONNECT (407, 403, …) or, for an https://
// proxy, its own certificate is not trusted. hpagent (client-node's HTTP proxy agent) says only
// "Bad response: 407" or Node's TLS words; kubectl says "Proxy Authentication Required". Every
// API connection (requests, watches, probes, port-forward tunnels) gets its socket from the
// agent, so these are put in words here, with what to do. No credentials reach a message.
import http from 'node:http';
import { testHookMs } from '../core/test-hooks.js';

/** The proxy could not be used: says what that means; `fix` is what to do (doctor prints it). */
export class ProxyRefusedError extends Error {
  constructor(
    message: string,
    readonly fix: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ProxyRefusedError';
  }
}

export interface ProxyInUse {
  /** The proxy URL with credentials (to tell whether there were any), never shown. */
  url: string;
  /** Without credentials, for messages. */
  proxy?: string;
  /** "the kubeconfig's proxy-url", "HTTPS_PROXY", … */
  source?: string;
  /** The --extra-ca file, when one is trusted. */
  extraCA?: string;
}

type ConnectionCallback = (err: Error | null, socket?: unknown) => void;

/** An HTTP proxy's answer to our CONNECT (and the way to it: TCP, its own TLS) must come in this long. */
export const PROXY_CONNECT_TIMEOUT_MS = 30_000;

function proxyConnectTimeoutMs(): number {
  return testHookMs('PROXYOUT_TEST_PROXY_CONNECT_MS') ?? PROXY_CONNECT_TIMEOUT_MS;
}

/**
 * hpagent gives its CONNECT the caller's `timeout`, none by default, and a request destroyed
 * before it has a socket cannot end a CONNECT under way: a proxy that took the connection and
 * never answered held it for ever, one more each attempt. Without a timeout of the caller's, the
 * CONNECT gets ours; the tunnel it yields gets none (an idle watch is no fault).
 */
export function boundProxyConnect(agent: http.Agent): void {
  const target = agent as unknown as { createConnection(options: { timeout?: number }, callback: ConnectionCallback): unknown };
  const create = target.createConnection.bind(agent);
  target.createConnection = (options, callback) => {
    if (options.timeout) return create(options, callback);
    return create({ ...options, timeout: proxyConnectTimeoutMs() }, (err, socket) => {
      (socket as { setTimeout?: (ms: number) => void } | null | undefined)?.setTimeout?.(0);
      callback(err ?? null, socket);
    });
  };
}

/** Wraps the agent's createConnection: what fails before the tunnel is up is about the proxy. */
export function explainProxyFailures(agent: http.Agent, proxy: ProxyInUse): void {
  const target = agent as unknown as { createConnection(options: object, callback: ConnectionCallback): unknown };
  const create = target.createConnection.bind(agent);
  target.createConnection = (options, callback) => create(options, (err, socket) => callback(err ? explained(err, proxy) : null, socket));
}

/** Node's codes for a certificate chain or name it will not accept. */
const CERT_CODES = /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ERR_TLS_CERT_ALTNAME_INVALID/;

/** The API server's own certificate was not accepted (not a proxy's on the way: explained() makes that a ProxyRefusedError). */
export function serverCertRefused(err: unknown): boolean {
  return !(err instanceof ProxyRefusedError) && CERT_CODES.test((err as { code?: unknown } | undefined)?.code?.toString() ?? '');
}

function explained(err: Error & { code?: string }, p: ProxyInUse): Error {
  const proxy = `the proxy ${p.proxy ?? ''} (from ${p.source ?? 'the proxy URL'})`;
  const where = p.source === "the kubeconfig's proxy-url" ? 'proxy-url' : (p.source ?? 'the proxy URL');
  // hpagent hands the callback only what happened on the way to the proxy: a TLS failure here is
  // about the proxy's own certificate (the API server's is checked after the tunnel is up).
  if (/^https:/i.test(p.url) && CERT_CODES.test(err.code ?? '')) {
    const fix = p.extraCA
      ? `the extra CA ${p.extraCA} did not sign the proxy's certificate either: put the CA that did (ask the proxy's administrators) in it`
      : "trust the CA that signed the proxy's certificate with --extra-ca FILE (config: extra-ca)";
    const hint = p.extraCA ? `, even with the extra CA ${p.extraCA}` : ': trust its CA with --extra-ca FILE';
    return Object.assign(new ProxyRefusedError(`${proxy}: its own certificate is not trusted (${err.message})${hint}`, fix, { cause: err }), {
      code: err.code,
    });
  }
  if (err.message === 'Proxy timeout') {
    const seconds = proxyConnectTimeoutMs() / 1000;
    const fix = `check that ${where} names a working proxy: it took the connection and did not answer`;
    return Object.assign(new ProxyRefusedError(`${proxy} did not answer the CONNECT to the API server within ${seconds} s`, fix, { cause: err }), {
      code: 'ETIMEDOUT',
    });
  }
  const m = /^Bad response: (\d{3})$/.exec(err.message);
  if (!m) return err;
  const status = Number(m[1]);
  const answer = `${status} ${http.STATUS_CODES[status] ?? 'Unknown'}`;
  const credentials = hasCredentials(p.url);
  if (status === 407 && credentials)
    return new ProxyRefusedError(
      `${proxy} refused the user name and password given in it (${answer})`,
      `correct the user name and password in ${where} (http://USER:PASSWORD@HOST:PORT; percent-encode special characters)`,
    );
  if (status === 407)
    return new ProxyRefusedError(
      `${proxy} wants a user name and password (${answer}), and none were given`,
      `give them in ${where}: http://USER:PASSWORD@HOST:PORT (percent-encode special characters)`,
    );
  return new ProxyRefusedError(
    `${proxy} refused to connect to the API server (${answer})`,
    "the proxy does not let this machine reach the API server's host and port: ask its administrators to allow them",
  );
}

function hasCredentials(url: string): boolean {
  try {
    const u = new URL(url);
    return u.username !== '' || u.password !== '';
  } catch {
    return false;
  }
}
