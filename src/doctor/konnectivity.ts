// Per konnectivity route: does its apiserver-network-proxy server take our connection (address,
// TLS both ways, the mode it speaks), does it have an agent, and does that agent reach the guest
// cluster's network. One test dial, made as the route makes its dials (konnectivity/dialer.ts,
// the dialer KonnectivityRoute.start() makes): to the guest's `kubernetes` Service, whose
// ClusterIP the route would resolve that name to (routes/konnectivity/resolve.ts) and which every
// cluster has. Nothing is sent on the stream; it is closed once open.
import { ApiStatusError } from '../cluster/api.js';
import type { ApiConnection } from '../cluster/api.js';
import { ConnectTimeoutError, ConnectionRefusedError, HostUnreachableError, ProxyError, errorMessage } from '../core/errors.js';
import { createKonnectivityDialer, type KonnectivityDialer } from '../konnectivity/dialer.js';
import { NoAgentError } from '../konnectivity/errors.js';
import { formatHostPort } from '../core/address.js';
import type { KonnectivityRouteSpec } from '../routes/spec.js';
import type { Check } from './report.js';

const NAME = 'konnectivity';

interface ServiceJson {
  spec?: { clusterIP?: string; ports?: Array<{ port?: number }> };
}

/** The check for `route`; `api` is its guest cluster's, already known to answer. */
export async function checkKonnectivity(route: KonnectivityRouteSpec, api: ApiConnection, timeoutMs: number): Promise<Check> {
  const base = { scope: route.name, name: NAME };
  const k = route.konnectivity;
  const server = `${k.server} (${k.mode})`;
  let dialer: KonnectivityDialer;
  try {
    dialer = await createKonnectivityDialer(k);
  } catch (err) {
    return { ...base, status: 'fail', detail: errorMessage(err), fix: `fix konnectivity.server, ca, cert and key of route ${route.name} (${route.origin})` };
  }
  let target: string;
  let ip: string;
  let port: number;
  try {
    const svc = await api.getJson<ServiceJson>('/api/v1/namespaces/default/services/kubernetes', timeoutMs);
    ip = svc.spec?.clusterIP ?? '';
    port = svc.spec?.ports?.[0]?.port ?? 443;
    if (!ip || ip === 'None') throw new Error('it has no ClusterIP');
    target = `the kubernetes Service (${formatHostPort(ip, port)})`;
  } catch (err) {
    const why = err instanceof ApiStatusError && err.statusCode === 403 ? 'reading it is not allowed' : errorMessage(err);
    dialer.close();
    return {
      ...base,
      status: 'skip',
      detail: `${server}: no test dial: the guest's default/kubernetes Service, the address dialled, could not be read (${why})`,
    };
  }
  const started = Date.now();
  const deadline = AbortSignal.timeout(timeoutMs);
  try {
    const stream = await dialer.dial(ip, port, deadline);
    stream.destroy();
    return { ...base, status: 'ok', detail: `${server} took the connection; its agent dialled ${target} in ${Date.now() - started} ms` };
  } catch (err) {
    return { ...base, ...verdict(err, deadline.aborted, route, target, timeoutMs) };
  } finally {
    dialer.close();
  }
}

/** What the test dial's failure says about the server, its agent or the guest's network, and what to do. */
function verdict(err: unknown, timedOut: boolean, route: KonnectivityRouteSpec, target: string, timeoutMs: number): Pick<Check, 'status' | 'detail' | 'fix'> {
  const k = route.konnectivity;
  const detail = errorMessage(err);
  if (timedOut) {
    return {
      status: 'fail',
      detail: `no answer to the test dial of ${target} within ${timeoutMs} ms (--request-timeout): ${detail}`,
      fix: `check that ${k.server} is the konnectivity server's frontend and that it answers from here; a slow agent may need a longer --request-timeout`,
    };
  }
  if (err instanceof NoAgentError) {
    return {
      status: 'fail',
      detail,
      fix: 'the server has no konnectivity agent connected: check the konnectivity-agent pods of the guest cluster (their logs say why they cannot reach the server)',
    };
  }
  // The agent's own dial failed: the server and its agent work, the guest's network did not answer.
  if (
    !(err instanceof ProxyError && err.cause) &&
    (err instanceof ConnectionRefusedError || err instanceof HostUnreachableError || err instanceof ConnectTimeoutError)
  ) {
    return {
      status: 'warn',
      detail: `${k.server} and its agent answered, but the agent could not reach ${target}: ${detail}`,
      fix: "check the agent's network in the guest cluster (kube-proxy on its node, NetworkPolicies around the agent)",
    };
  }
  return { status: 'fail', detail, fix: serverFix(err instanceof ProxyError && err.cause ? errorMessage(err.cause) : detail, route) };
}

/** The server failed us: read Node's and OpenSSL's words for which side of the connection is wrong. */
function serverFix(text: string, route: KonnectivityRouteSpec): string {
  const k = route.konnectivity;
  const other = k.mode === 'grpc' ? 'http-connect' : 'grpc';
  const where = `route ${route.name} (${route.origin})`;
  if (/ENOENT/.test(text)) return `no unix socket at ${k.server}: is the konnectivity server running on this machine, with --uds-name set to that path?`;
  if (/ECONNREFUSED/.test(text))
    return `nothing listens at ${k.server}: is the konnectivity server running, and is that its frontend port (--server-port, often 8090 or 8131)?`;
  if (/ENOTFOUND|EAI_AGAIN|getaddrinfo/.test(text)) return `the server's host name does not resolve from here: fix konnectivity.server of ${where}`;
  if (/ETIMEDOUT|EHOSTUNREACH|ENETUNREACH/.test(text)) return `${k.server} cannot be reached from here: check the network (a VPN, a firewall) and the address`;
  if (/no application protocol/i.test(text)) return `the server does not speak ${k.mode} there: set mode: ${other} for ${where} (the server's --mode)`;
  if (/alert (certificate required|bad certificate|unknown ca|certificate unknown|handshake failure|decrypt error)|alert number (116|42|48|46)/i.test(text)) {
    return `the server refused our client certificate: give ${where} cert and key signed by the CA the server trusts for clients (its --cluster-ca-cert)`;
  }
  if (/self[- ]signed|unable to (get|verify)|certificate has expired|does not match|altnames|CERT_|certificate/i.test(text)) {
    return `the server's certificate is not trusted: set ca of ${where} to the CA that signed it (its --server-ca-cert), and check the certificate names the host in konnectivity.server`;
  }
  return `the konnectivity server failed the connection: see the message and the server's log; check mode (${k.mode}, the server's --mode) and the TLS files of ${where}`;
}
