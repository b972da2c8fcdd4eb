// The human form of `status`: one row per managed proxy, then a line per dead one saying why
// and how to clean it up. (`status --json` has every figure unrounded.)
import { notAnswering, otherVersion, type ProxyStatus } from '../managed/status.js';
import { routeCondition, type RouteStatus } from '../routes/route.js';
import { unixSocksUrl } from '../proxy/client-env.js';
import { urlAuthority } from '../listeners/bound-address.js';
import { recordedOn } from '../managed/registry.js';
import { escapeControls } from '../core/escape.js';

const HEADERS = ['ID', 'STATE', 'CONTEXT', 'NAMESPACE', 'PID', 'UPTIME', 'LISTEN', 'OPEN', 'TOTAL', 'UP', 'DOWN', 'CACHE'];

export function statusTable(rows: readonly ProxyStatus[], currentVersion?: string): string[] {
  if (rows.length === 0) return ['no managed proxies (start one with: kubectl proxyout connect)'];
  const cells = rows.map((r) =>
    [
      r.id,
      r.state,
      r.context || '-',
      r.context ? r.namespace : '-',
      r.pid === null ? '-' : String(r.pid),
      r.uptimeSeconds === null ? '-' : formatUptime(r.uptimeSeconds),
      // A unix socket as curl names it (socks5h://localhost/PATH); no URL names an HTTP proxy on one.
      [
        r.socks && (r.socks.startsWith('unix:') ? unixSocksUrl(r.socks.slice(5)) : `socks5h://${urlAuthority(r.socks)}`),
        r.http && (r.http.startsWith('unix:') ? `http+${r.http}` : `http://${urlAuthority(r.http)}`),
      ]
        .filter(Boolean)
        .join(',') || '-',
      num(r.openStreams),
      num(r.totalStreams),
      r.bytesFromClients === null ? '-' : formatBytes(r.bytesFromClients),
      r.bytesToClients === null ? '-' : formatBytes(r.bytesToClients),
      cacheCell(r.cache),
    ].map(escapeControls),
  );
  const widths = HEADERS.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((v, i) => (i === c.length - 1 ? v : v.padEnd(widths[i]!))).join('  ');
  const out = [line(HEADERS), ...cells.map(line)];
  for (const r of rows) for (const f of r.forwards ?? []) out.push(`${r.id}: port ${f.listen} → ${f.target}`);
  for (const r of rows) {
    // One line per route when a proxy serves a table; a single cluster says it all in its row,
    // unless it is not serving (degraded, failing): then why and since when.
    const routes = r.routes ?? [];
    for (const route of routes) if (routes.length > 1 || (route.state !== 'ready' && route.reason)) out.push(`${r.id}: ${routeLine(route)}`);
  }
  for (const r of rows) {
    for (const t of r.transports ?? [])
      out.push(
        `${r.id}: ${t.route !== undefined ? `route ${t.route}: ` : ''}${t.pod} via ${t.transport}: ${t.tunnels} ${t.tunnels === 1 ? 'tunnel' : 'tunnels'}, ${t.streams} ${t.streams === 1 ? 'stream' : 'streams'}`,
      );
  }
  for (const r of rows) {
    const failing = recentFailure(r);
    if (failing) out.push(`${r.id}: ${failing}`);
  }
  for (const r of rows) {
    const upgraded = currentVersion === undefined ? undefined : otherVersion(r, currentVersion);
    if (upgraded) out.push(`${r.id}: ${upgraded.started}; ${upgraded.fix}`);
    if (r.answering === false) out.push(notAnswering(r.id));
    // A stopper interrupted (Ctrl-C on `disconnect`) with a daemon that is hung or stopped
    // (SIGSTOP) leaves it "stopping" for good: say how to see the stop through.
    if (r.state === 'stopping')
      out.push(`${r.id}: stopping (open streams get its drain time to finish); if it stays stopping, end it with: kubectl proxyout disconnect ${r.id}`);
    if (r.state === 'dead') out.push(`${r.id}: dead${r.error ? ` (${r.error})` : ''}; clean up with: kubectl proxyout disconnect ${r.id}`);
    if (r.state === 'elsewhere')
      out.push(
        `${r.id}: runs elsewhere (${recordedOn(r.elsewhere)}); ` + `manage it there, or forget it here with: kubectl proxyout disconnect ${r.id} --forget`,
      );
  }
  // Names and reasons come from the kubeconfig and the API server: a control in one would move the
  // cursor or start a new line. Cells are escaped before their widths are measured.
  return out.map(escapeControls);
}

/** "route prod (cluster prod, default): …; ready; 2 open, 14 total, up 1.2KiB, down 20MiB; API 12 ms". */
export function routeLine(route: RouteStatus): string {
  const since = route.since ? ` since ${clockTime(route.since)}` : '';
  const down = route.state === 'degraded' && route.condition === 'down' ? '; down: new streams fail at once' : '';
  const state = route.state === 'error' || route.state === 'degraded' ? `${route.state}${since}: ${route.reason ?? 'unknown'}${down}` : route.state;
  const s = route.streams;
  const figures = s ? `; ${s.openStreams} open, ${s.totalStreams} total, up ${formatBytes(s.bytesFromClients)}, down ${formatBytes(s.bytesToClients)}` : '';
  // The last round trip measured: not one to show beside "does not answer" (it is from before).
  const rtt = routeCondition(route) === 'down' ? undefined : (route.details?.apiRoundTrip as { ms?: unknown } | undefined);
  return `route ${route.serves ?? `${route.name} (${route.kind})`}; ${state}${figures}${typeof rtt?.ms === 'number' ? `; API ${rtt.ms} ms` : ''}`;
}

/** "14:03:07" in local time, or the date too when it is not today. */
function clockTime(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const time = d.toTimeString().slice(0, 8);
  // The date in the same zone as the time (toISOString would give UTC's, a day off at night).
  const date = `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
  return d.toDateString() === new Date().toDateString() ? time : `${date} ${time}`;
}

/** "synced", or while the first sync runs "syncing (pods 12000/50000, services 3000)". */
export function cacheCell(cache: ProxyStatus['cache']): string {
  if (!cache) return '-';
  const progress = Object.entries(cache.syncing ?? {}).map(([kind, p]) => `${kind} ${p.listed}${p.total !== undefined ? `/${p.total}` : ''}`);
  return progress.length ? `${cache.state} (${progress.join(', ')})` : cache.state;
}

function num(n: number | null): string {
  return n === null ? '-' : String(n);
}

/** 45s, 12m3s, 5h2m, 3d4h. */
export function formatUptime(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86_400)}d${Math.floor((s % 86_400) / 3600)}h`;
}

/** 512B, 1.5KiB, 20MiB, 3.2GiB. */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v}B` : `${v < 10 ? v.toFixed(1) : Math.round(v)}${units[u]}`;
}

/** Failures within this long are news: a route can be ready while its streams are refused (RBAC). */
const RECENT_FAILURE_MS = 60_000;

/** "the last stream failed 3 s ago (to web.shop:80): why; none opened since", when that is recent. */
export function recentFailure(r: Pick<ProxyStatus, 'id' | 'lastFailure'>, now = Date.now()): string | undefined {
  const last = r.lastFailure;
  const ago = last ? now - Date.parse(last.at) : Infinity;
  if (!last || !(ago < RECENT_FAILURE_MS)) return undefined;
  const to = last.target ? ` (to ${last.target})` : '';
  const since = last.openedSince ? '' : '; no stream opened since';
  return `the last stream failed ${Math.max(0, Math.round(ago / 1000))} s ago${to}: ${last.message}${since}; see kubectl proxyout logs ${r.id}`;
}
