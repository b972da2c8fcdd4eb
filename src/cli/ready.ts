// What `kubectl proxyout` prints on stdout once it listens: a human line per listener, then
// shell lines the user can paste (or `eval`), so they carry the real bound port, not the flag.
import type { AddressInfo } from 'node:net';
import type { RunningProxy } from '../proxy/running.js';
import { describeRoute, type RoutingTable } from '../routing/table-spec.js';

/** "host:port" with IPv6 hosts bracketed, as URLs and proxy variables need them. */
export function formatAddress(address: Pick<AddressInfo, 'address' | 'port'>): string {
  const host = address.address.includes(':') ? `[${address.address}]` : address.address;
  return `${host}:${address.port}`;
}

/**
 * `password` is given only for credentials `connect` generated: they then go into the exported
 * proxy URLs (nobody else knows them); credentials the user chose are never printed.
 */
export function readyLines(running: Pick<RunningProxy, 'socks' | 'http' | 'context' | 'namespace'> & { table?: RoutingTable }, authUser?: string, password?: string): string[] {
  const routes = running.table?.routes.length ?? 1;
  const where = routes > 1 ? `(${routes} routes; default: context ${running.context}, namespace ${running.namespace})` : `(context ${running.context}, namespace ${running.namespace})`;
  const lines: string[] = [];
  const exports: string[] = [];
  const userinfo = authUser !== undefined && password !== undefined ? `${encodeURIComponent(authUser)}:${encodeURIComponent(password)}@` : '';
  if (running.socks) {
    const socks = formatAddress(running.socks);
    lines.push(`kubectl-proxyout: SOCKS5 proxy on ${socks} ${where}`);
    // socks5h: the client hands us the name, so cluster DNS names resolve inside the cluster.
    exports.push(`export ALL_PROXY=socks5h://${userinfo}${socks}`);
  }
  if (running.http) {
    const http = `http://${userinfo}${formatAddress(running.http)}`;
    lines.push(`kubectl-proxyout: HTTP proxy on ${formatAddress(running.http)} ${where}`);
    exports.push(`export HTTP_PROXY=${http}`, `export HTTPS_PROXY=${http}`);
    // curl (and others) ignore upper-case HTTP_PROXY for plain http:// URLs (httpoxy): lower case too.
    exports.push(`export http_proxy=${http}`, `export https_proxy=${http}`);
  }
  if (running.table && routes > 1) for (const r of running.table.routes) lines.push(`kubectl-proxyout:   route ${describeRoute(running.table, r)}`);
  if (authUser !== undefined) lines.push(userinfo ? generatedAuthLine(authUser) : authLine(authUser));
  return [...lines, ...exports];
}

/** The ready line for generated credentials: the lines below carry the password. */
export function generatedAuthLine(username: string): string {
  return `kubectl-proxyout: proxy authentication is on with a generated password for user ${username}; the lines below carry it (connect prints them again; --no-auth for browsers)`;
}

/** The ready line telling clients they need credentials (the password itself is never printed). */
export function authLine(username: string): string {
  return `kubectl-proxyout: proxy authentication is on: clients use socks5h://${encodeURIComponent(username)}:PASSWORD@… or http://${encodeURIComponent(username)}:PASSWORD@…`;
}
