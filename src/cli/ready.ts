// What `kubectl proxyout` prints on stdout once it listens: a human line per listener, then
// shell lines the user can paste (or `eval`), so they carry the real bound port, not the flag.
import type { AddressInfo } from 'node:net';
import type { RunningProxy } from '../proxy/running.js';
import { describeRoute, type RoutingTable } from '../routing/table-spec.js';
import { formatAddress } from '../listeners/bound-address.js';
import { UNIX_FAMILY } from '../listeners/unix-socket.js';
import { curlCannotName } from '../core/url-path.js';
import { exportLines, exportedVariables } from '../proxy/client-env.js';
import { escapeControls, shellQuote } from '../core/escape.js';

/**
 * `password` is given only for credentials `connect` generated: they then go into the exported
 * proxy URLs (nobody else knows them); credentials the user chose are never printed.
 */
export function readyLines(running: ReadyView, authUser?: string, password?: string): string[] {
  const { info, shell } = readyParts(running, authUser, password);
  return [...info, ...shell];
}

/**
 * The ready lines in two parts: what a person reads, and the shell lines alone, which `connect`
 * prints on stdout by themselves so that `eval "$(kubectl proxyout connect)"` runs only them.
 */
export function readyParts(running: ReadyView, authUser?: string, password?: string): { info: string[]; shell: string[] } {
  const routes = running.table?.routes.length ?? 1;
  const cluster =
    (running.table && running.table.defaultRoute === undefined) || !running.context
      ? undefined
      : `context ${escapeControls(running.context)}, namespace ${running.namespace}`;
  const where = routes > 1 || !cluster ? `(${routes} route${routes === 1 ? '' : 's'}; ${cluster ? `default: ${cluster}` : 'no cluster'})` : `(${cluster})`;
  const lines: string[] = [];
  if (running.socks && running.socks.family === UNIX_FAMILY) {
    lines.push(`kubectl-proxyout: SOCKS5 proxy on unix socket ${running.socks.address} ${where}`);
    if (curlCannotName(running.socks.address))
      lines.push(
        'kubectl-proxyout: curl cannot use this socket: it takes a proxy URL whose path has non-ASCII letters for a bad host name; choose a path without them',
      );
  } else if (running.socks) {
    lines.push(`kubectl-proxyout: SOCKS5 proxy on ${formatAddress(running.socks)} ${where}`);
  }
  if (running.http && running.http.family === UNIX_FAMILY) {
    // No proxy variable can name a unix socket, and curl's --unix-socket bypasses --proxy; but it
    // sends an absolute-form request (a plain http:// proxy request) with --request-target.
    const path = running.http.address;
    const auth =
      authUser !== undefined && password !== undefined ? ` -H 'Proxy-Authorization: Basic ${Buffer.from(`${authUser}:${password}`).toString('base64')}'` : '';
    lines.push(
      `kubectl-proxyout: HTTP proxy on unix socket ${path} ${where}; plain http:// with curl: curl --unix-socket ${shellQuote(path)}${auth} --request-target http://NAME/ http://NAME/`,
    );
  } else if (running.http) {
    lines.push(`kubectl-proxyout: HTTP proxy on ${formatAddress(running.http)} ${where}`);
  }
  for (const f of running.forwards ?? [])
    lines.push(`kubectl-proxyout: port ${formatAddress(f.address)} → ${f.target} (${forwardExample(f.address, f.target)})`);
  if (running.table && routes > 1) for (const r of running.table.routes) lines.push(`kubectl-proxyout:   route ${describeRoute(running.table, r)}`);
  if (authUser !== undefined) lines.push(password !== undefined ? generatedAuthLine(authUser) : authLine(authUser));
  for (const w of running.warnings ?? []) lines.push(`kubectl-proxyout: warning: ${w}`);
  if (running.pageUrl) lines.push(`kubectl-proxyout: live page at ${running.pageUrl} (this machine only; the token is new at every start)`);
  // Pasted into a shell (or eval'd).
  return {
    info: lines,
    shell: exportLines(exportedVariables({ ...running, clusterDomain: running.clusterDomain ?? running.table?.clusterDomain }, authUser, password)),
  };
}

type ReadyView = Pick<RunningProxy, 'socks' | 'http' | 'context' | 'namespace' | 'forwards' | 'pageUrl' | 'warnings'> & {
  table?: RoutingTable;
  /** The cluster routes' API server URLs: NO_PROXY keeps them off the proxy (proxy/client-env.ts). */
  apiServers?: readonly string[];
  /** Inherited NO_PROXY entries for it are dropped; else the table's (managed entries may have none). */
  clusterDomain?: string;
};

/** The ready line for generated credentials: the lines below carry the password. */
export function generatedAuthLine(username: string): string {
  return `kubectl-proxyout: proxy authentication is on with a generated password for user ${username}; the lines below carry it (connect prints them again; --no-proxy-auth for browsers)`;
}

/** The ready line telling clients they need credentials (the password itself is never printed). */
export function authLine(username: string): string {
  return `kubectl-proxyout: proxy authentication is on: clients use socks5h://${encodeURIComponent(username)}:PASSWORD@… or http://${encodeURIComponent(username)}:PASSWORD@…`;
}

/** A command to paste for a mapping, by the target's well-known port (psql, redis-cli, …; else nc). */
export function forwardExample(address: Pick<AddressInfo, 'address' | 'port'>, target: string): string {
  const host = address.address;
  const p = address.port;
  const targetPort = Number(target.slice(target.lastIndexOf(':') + 1));
  const targetHost = target.slice(0, target.lastIndexOf(':'));
  const urlHost = host.includes(':') ? `[${host}]` : host;
  const isDefault = host === '127.0.0.1';
  switch (targetPort) {
    case 5432:
      return `psql -h ${host} -p ${p}`;
    case 6379:
      return isDefault ? `redis-cli -p ${p}` : `redis-cli -h ${host} -p ${p}`;
    case 3306:
      return `mysql -h ${host} -P ${p}`;
    case 27017:
      return isDefault ? `mongosh --port ${p}` : `mongosh --host ${host} --port ${p}`;
    case 443:
    case 8443:
      // TLS names the target, not 127.0.0.1: keep the name and connect to the mapping.
      return `curl --connect-to ${targetHost}:${targetPort}:${urlHost}:${p} https://${targetHost}${targetPort === 443 ? '' : `:${targetPort}`}/`;
    case 80:
    case 8080:
      return `curl http://${urlHost}:${p}/`;
    default:
      return `nc ${host} ${p}`;
  }
}
