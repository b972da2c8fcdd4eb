// What `kubectl proxyout` prints on stdout once it listens: a human line per listener, then
// shell lines the user can paste (or `eval`), so they carry the real bound port, not the flag.
import type { AddressInfo } from 'node:net';
import type { RunningProxy } from '../proxy/running.js';

/** "host:port" with IPv6 hosts bracketed, as URLs and proxy variables need them. */
export function formatAddress(address: Pick<AddressInfo, 'address' | 'port'>): string {
  const host = address.address.includes(':') ? `[${address.address}]` : address.address;
  return `${host}:${address.port}`;
}

export function readyLines(running: Pick<RunningProxy, 'socks' | 'http' | 'context' | 'namespace'>, authUser?: string): string[] {
  const where = `(context ${running.context}, namespace ${running.namespace})`;
  const lines: string[] = [];
  const exports: string[] = [];
  if (running.socks) {
    const socks = formatAddress(running.socks);
    lines.push(`kubectl-proxyout: SOCKS5 proxy on ${socks} ${where}`);
    // socks5h: the client hands us the name, so cluster DNS names resolve inside the cluster.
    exports.push(`export ALL_PROXY=socks5h://${socks}`);
  }
  if (running.http) {
    const http = formatAddress(running.http);
    lines.push(`kubectl-proxyout: HTTP proxy on ${http} ${where}`);
    exports.push(`export HTTP_PROXY=http://${http}`, `export HTTPS_PROXY=http://${http}`);
    // curl (and others) ignore upper-case HTTP_PROXY for plain http:// URLs (httpoxy): lower case too.
    exports.push(`export http_proxy=http://${http}`, `export https_proxy=http://${http}`);
  }
  if (authUser !== undefined) lines.push(authLine(authUser));
  return [...lines, ...exports];
}

/** The ready line telling clients they need credentials (the password itself is never printed). */
export function authLine(username: string): string {
  return `kubectl-proxyout: proxy authentication is on: clients use socks5h://${encodeURIComponent(username)}:PASSWORD@… or http://${encodeURIComponent(username)}:PASSWORD@…`;
}
