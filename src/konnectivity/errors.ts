// What a konnectivity server's answers mean for our client. The server hands us the agent's dial
// error as text (Go's net error: "dial tcp 10.0.0.5:80: connect: connection refused"), in a
// DIAL_RSP in grpc mode, or as the body of a non-200 CONNECT answer in http-connect mode
// (apiserver-network-proxy pkg/server/server.go mapDialErrorToHTTPStatus: timeouts 504, "too many
// open files" 503, everything else 502; servers before that change answered 503 for every dial
// error, and pkg/server/tunnel.go answers 500 "currently no tunnels available" when no agent is
// connected). So the text decides; the status is only the fallback.
import { ConnectionRefusedError, ConnectTimeoutError, HostUnreachableError, ProxyError, UpstreamApiError, errorMessage } from '../core/errors.js';

/** Longest piece of server text we quote (it is the far end's, so it is also escaped by replyFor). */
const MAX_QUOTED = 200;

function quote(text: string): string {
  const t = text.trim();
  return t.length > MAX_QUOTED ? `${t.slice(0, MAX_QUOTED)}…` : t;
}

/**
 * The server has no agent connected to dial through (its answer, not the far end's): a class of
 * its own so that doctor can tell it from the server failing and from the agent's dial failing.
 */
export class NoAgentError extends UpstreamApiError {}

type Kind = 'refused' | 'timeout' | 'unreachable' | 'no-agent' | 'dial-closed';

/** What the text says happened, when it says something we know. */
function classify(text: string): Kind | undefined {
  const t = text.toLowerCase();
  if (t.includes('connection refused')) return 'refused';
  if (t.includes('timeout') || t.includes('timed out') || t.includes('deadline exceeded')) return 'timeout';
  if (/no route to host|network is unreachable|host is unreachable|network is down|no such host|connection reset/.test(t)) return 'unreachable';
  if (t.includes('no agent') || t.includes('no tunnels') || t.includes('backend')) return 'no-agent';
  if (t.trim() === 'dial closed') return 'dial-closed';
  return undefined;
}

function errorOf(kind: Kind, target: string, said: string): ProxyError {
  switch (kind) {
    case 'refused':
      return new ConnectionRefusedError(`${target} refused the connection (konnectivity: ${said})`, { retryable: true });
    case 'timeout':
      return new ConnectTimeoutError(`connecting to ${target} through konnectivity timed out (${said})`);
    case 'unreachable':
      return new HostUnreachableError(`${target} is unreachable from the cluster's network (konnectivity: ${said})`);
    case 'no-agent':
      return new NoAgentError(`the konnectivity server has no agent to dial ${target} (${said})`);
    case 'dial-closed':
      return new HostUnreachableError(`the konnectivity agent dropped the dial to ${target}`);
  }
}

/**
 * The agent's (or server's) dial error for `target`, as the ProxyError the client is told.
 * Refused is retryable: another address of the same name may accept.
 */
export function dialFailure(text: string, target: string): ProxyError {
  const kind = classify(text);
  return kind ? errorOf(kind, target, quote(text)) : new HostUnreachableError(`cannot connect to ${target} through konnectivity: ${quote(text)}`);
}

/** A non-200 answer to CONNECT (http-connect mode): the body's text first, then the status. */
export function connectAnswerError(status: number, body: string, target: string): ProxyError {
  const kind = classify(body);
  const said = body.trim() ? `: ${quote(body)}` : '';
  if (kind) return errorOf(kind, target, `HTTP ${status}${said}`);
  if (status === 504) return new ConnectTimeoutError(`connecting to ${target} through konnectivity timed out (HTTP ${status}${said})`);
  if (status === 502 || status === 503) return new HostUnreachableError(`cannot connect to ${target} through konnectivity (HTTP ${status}${said})`);
  return new UpstreamApiError(`the konnectivity server answered CONNECT ${target} with HTTP ${status}${said}`);
}

/** The konnectivity server itself failed us (cannot connect, TLS refused, stream broken). */
export function serverError(server: string, err: unknown, target?: string): ProxyError {
  if (err instanceof ProxyError) return err;
  const what = target ? ` while dialling ${target}` : '';
  return new UpstreamApiError(`konnectivity server ${server} failed${what}: ${quote(errorMessage(err))}`, { cause: err });
}
