// kubectl talks to an http:// server (`kubectl proxy`, a development cluster's insecure port) as
// to any other. client-node refuses one unless insecure-skip-tls-verify is set ("HTTP protocol is
// not allowed when skipTLSVerify is not set or false"), a TLS setting that means nothing there.
import http from 'node:http';
import type { Cluster, KubeConfig } from '@kubernetes/client-node';

type AgentMaker = (cluster: Cluster | null, options: http.AgentOptions) => http.Agent;

/** `kc` (and every view made of it with Object.create) gets a plain agent for an http:// server. */
export function allowPlainHttp(kc: KubeConfig): void {
  const k = kc as unknown as { createAgent: AgentMaker };
  const own = k.createAgent;
  k.createAgent = function (this: unknown, cluster, options) {
    if (cluster?.server.startsWith('http:') && !cluster.proxyUrl && !cluster.skipTLSVerify) return new http.Agent(options);
    return own.call(this, cluster, options);
  };
}
