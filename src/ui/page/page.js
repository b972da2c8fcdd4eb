// The live page's script: follows /ui/events (server-sent events, ui/page-server.ts) and draws
// proxies, routes, streams, failures and a chart. Every name from a cluster or a client goes in
// as text (textContent / text nodes), never as markup.
'use strict';

const KEEP = 200;
/** The proxy serving the page, among managed ones (a key no connection ID can be). */
const THIS_PROXY = ':this';
const SHOW = 200;
/**
 * Every proxy sends a sample a second: one silent this long is stopped (Ctrl-Z, SIGSTOP) or stuck,
 * and serves nobody, though its last state said ready.
 */
const SILENT_MS = 5_000;
const proxies = new Map();
const HINTS = {
  'not-allowed': 'not a cluster name, an IP no cluster knows, or RBAC forbids pods/portforward',
  'unknown-target': 'no such Service or pod: check the namespace',
  'no-ready-endpoint': 'the Service has no ready endpoint: kubectl get endpointslices -l kubernetes.io/service-name=NAME',
  'unsupported-target': 'an ExternalName Service for an outside host, or endpoints that are no pods: connect to the real target',
  'connection-refused': 'the pod does not listen on that port, or the Service has no such port',
  timeout: 'resolving and opening the tunnel took longer than --connect-timeout',
  'api-error': 'the API server failed the port-forward (unreachable, 5xx, 401)',
  overloaded: '--max-streams streams are open, or the proxy is stopping',
  'route-unavailable': 'the route is not serving: see its state above',
  'command-not-supported': 'BIND, UDP or a WebSocket upgrade sent as plain HTTP: TCP via CONNECT only',
  'auth-failed': 'the client did not present the proxy credentials',
  'bad-request': 'the client sent a malformed request',
};

function bytes(n) {
  if (n === undefined || n === null) return '';
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = -1;
  do {
    v /= 1024;
    i++;
  } while (v >= 1024 && i < units.length - 1);
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

function duration(ms) {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  const s = Math.round(ms / 1000);
  if (s < 90) return `${s} s`;
  const m = Math.round(s / 60);
  return m < 90 ? `${m} min` : `${Math.round(m / 60)} h`;
}

const clock = (ms) => new Date(ms).toLocaleTimeString();

function proxyState(id) {
  let p = proxies.get(id);
  if (!p) {
    p = {
      id,
      info: undefined,
      routes: [],
      totals: undefined,
      open: new Map(),
      recent: [],
      failures: [],
      samples: [],
      gone: undefined,
      stopping: false,
      heardAt: 0,
    };
    proxies.set(id, p);
  }
  return p;
}

function keepLast(list, items) {
  list.push(...items);
  if (list.length > KEEP) list.splice(0, list.length - KEEP);
}

/** Why a proxy is taken as not answering: silent SILENT_MS or more (one gone or stopping sends no samples). */
function silence(p) {
  const quiet = Date.now() - p.heardAt;
  return p.gone || p.stopping || quiet < SILENT_MS ? undefined : `no word from the proxy for ${duration(quiet)}: stopped (Ctrl-Z) or stuck`;
}

function receive(message) {
  const p = proxyState(message.proxy);
  p.heardAt = Date.now();
  switch (message.type) {
    case 'snapshot':
      p.gone = undefined;
      p.stopping = false;
      p.info = message.info;
      p.routes = message.routes;
      p.totals = message.totals;
      p.open = new Map(message.open.map((s) => [s.id, s]));
      p.recent = message.recent.slice(-KEEP);
      p.failures = message.failures.slice(-KEEP);
      p.samples = message.samples.slice();
      break;
    case 'events':
      for (const s of message.opened) p.open.set(s.id, s);
      for (const s of message.closed) p.open.delete(s.id);
      keepLast(p.recent, message.closed);
      keepLast(p.failures, message.refused);
      break;
    case 'sample':
      p.samples.push(message.sample);
      if (p.samples.length > 300) p.samples.shift();
      p.totals = message.totals;
      for (const [id, from, to] of message.live) {
        const s = p.open.get(id);
        if (s) Object.assign(s, { bytesFromClient: from, bytesToClient: to });
      }
      break;
    case 'routes':
      p.routes = message.routes;
      break;
    case 'stopping':
      p.stopping = true;
      break;
    case 'gone':
      p.gone = message.reason;
      p.open.clear();
      break;
  }
  scheduleRender();
}

let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    render();
  });
}

function copyBlock(text) {
  const pre = el('pre', { class: 'mono' }, text);
  const button = el('button', { type: 'button', title: 'copy' }, 'copy');
  // The text shown when clicked: a kept button (patchChildren) may outlive the text it was made with.
  button.addEventListener('click', () => navigator.clipboard?.writeText(pre.textContent));
  return el('div', { class: 'copy' }, pre, button);
}

function renderProxies() {
  const cards = [];
  for (const p of proxies.values()) {
    const info = p.info;
    const title = p.id === THIS_PROXY ? 'this proxy' : `proxy ${p.id}`;
    const silent = silence(p);
    const state = p.gone
      ? badge('gone', 'gone')
      : p.stopping
        ? badge('stopping', 'degraded')
        : silent
          ? badge('not answering', 'silent')
          : badge('live', 'live');
    const rows = [];
    const row = (name, value) => value && rows.push(el('dt', {}, name), el('dd', {}, value));
    if (info) {
      row('context', `${info.context || '(none)'}${info.namespace ? `, namespace ${info.namespace}` : ''}`);
      row('SOCKS5', info.socks);
      row('HTTP', info.http);
      for (const f of info.forwards || []) row('mapping', `${f.listen} → ${f.target}`);
      row('up for', duration(Date.now() - Date.parse(info.startedAt)));
      row('pid', String(info.pid));
      row('credentials', info.auth ? 'required (proxy authentication on)' : 'none (loopback clients)');
      if (info.env && info.env.length) row('env', copyBlock(info.env.join('\n')));
      if (info.pacUrl) row('PAC', copyBlock(info.pacUrl));
    }
    if (p.gone) row('why', p.gone);
    else if (silent) row('why', silent);
    cards.push(el('div', { class: 'card', 'data-proxy': p.id }, el('h3', {}, title, state), el('dl', {}, rows)));
  }
  const holder = document.getElementById('proxies');
  patchChildren(holder, cards.length ? cards : [el('p', { class: 'empty' }, 'No managed proxy is running: start one with kubectl proxyout connect.')]);
}

function cacheText(details) {
  const cache = details && details.cache;
  if (!cache) return '';
  const states = Object.values(cache.watches || {});
  const word = states.includes('retrying') ? 'retrying' : states.includes('starting') ? 'syncing' : 'synced';
  const progress = Object.entries(cache.syncing || {}).map(([what, s]) => `${what} ${s.listed}${s.total !== undefined ? `/${s.total}` : ''}`);
  return [`${word} (${cache.scope === 'cluster' ? 'cluster-wide' : `${(cache.namespaces || []).length} namespaces`})`, ...progress].join('; ');
}

/** "12 services, 30 endpointslices, 41 pods": what the cache holds. */
function objectsText(details) {
  const objects = details && details.cache && details.cache.objects;
  return objects
    ? Object.entries(objects)
        .map(([kind, n]) => `${n} ${kind}`)
        .join(', ')
    : '';
}

/** The last API round trip; none for a route that is down (the figure is from before). */
function roundTripText(r) {
  const rtt = conditionOf(r) !== 'down' && r.details && r.details.apiRoundTrip;
  return rtt && typeof rtt.ms === 'number' ? `${rtt.ms} ms` : '';
}

/** ready / degraded / down when the route has served; starting or syncing before. */
const conditionOf = (r) => r.condition || (r.state === 'error' ? 'down' : r.state);

function renderRoutes() {
  const rows = [];
  for (const p of proxies.values()) {
    for (const r of p.routes) {
      const since = r.since ? `${duration(Date.now() - Date.parse(r.since))} (${clock(Date.parse(r.since))})` : '';
      const s = r.streams || {};
      const silent = silence(p);
      const condition = p.gone || p.stopping ? 'down' : silent ? 'unknown' : conditionOf(r);
      const reason = p.gone ? `proxy gone: ${p.gone}` : p.stopping ? 'the proxy is stopping: no new connections' : silent || r.reason;
      rows.push(
        el(
          'tr',
          { 'data-proxy': p.id, 'data-route': r.name, 'data-state': p.gone ? 'gone' : r.state, 'data-condition': condition },
          td(p.id),
          td(r.name, 'mono'),
          td(r.kind),
          td(r.serves || '', 'mono'),
          el('td', { class: 'state' }, badge(condition), reason ? el('span', { class: 'reason' }, reason) : null),
          td(since),
          el('td', { class: 'cache' }, cacheText(r.details), el('span', { class: 'reason objects' }, objectsText(r.details))),
          el(
            'td',
            { class: 'num rtt', title: r.details?.apiRoundTrip ? `measured ${clock(Date.parse(r.details.apiRoundTrip.at))}` : undefined },
            roundTripText(r),
          ),
          td(s.openStreams !== undefined ? `${s.openStreams} open / ${s.totalStreams}` : '', 'num'),
          td(s.bytesFromClients !== undefined ? `${bytes(s.bytesFromClients)} / ${bytes(s.bytesToClients)}` : '', 'num'),
        ),
      );
    }
  }
  patchChildren(document.querySelector('#routes tbody'), rows);
}

function streamMatches(s, proxy, filter, errorsOnly) {
  if (errorsOnly && !s.error) return false;
  if (!filter) return true;
  return [proxy, s.route, s.target, s.via, s.error, s.client].some((v) => v && v.toLowerCase().includes(filter));
}

function renderStreams() {
  const filter = document.getElementById('filter').value.trim().toLowerCase();
  const errorsOnly = document.getElementById('errors-only').checked;
  const all = [];
  for (const p of proxies.values()) {
    for (const s of p.open.values()) all.push({ p: p.id, s, open: true });
    for (const s of p.recent) all.push({ p: p.id, s, open: false });
  }
  const shown = all.filter(({ p, s }) => streamMatches(s, p, filter, errorsOnly)).sort((a, b) => b.s.startedAt - a.s.startedAt);
  const now = Date.now();
  const rows = shown.slice(0, SHOW).map(({ p, s, open }) => {
    const status = open ? badge('open') : s.error ? el('span', {}, badge('error'), el('span', { class: 'reason' }, s.error)) : badge('closed');
    return el(
      'tr',
      { 'data-proxy': p, 'data-stream': s.id, 'data-target': s.target },
      td(clock(s.startedAt)),
      td(p),
      td(s.client, 'mono'),
      td(s.target, 'mono'),
      td(s.route, 'mono'),
      td(s.via, 'mono via'),
      td(s.transport || ''),
      td(bytes(s.bytesFromClient), 'num'),
      td(bytes(s.bytesToClient), 'num'),
      td(duration((s.endedAt || now) - s.startedAt), 'num'),
      el('td', { class: 'status' }, status),
    );
  });
  patchChildren(document.querySelector('#streams tbody'), rows);
  document.getElementById('stream-count').textContent = `${Math.min(SHOW, shown.length)} of ${shown.length} shown`;
}

function renderFailures() {
  const counts = new Map();
  const list = [];
  for (const p of proxies.values()) {
    for (const [reason, n] of Object.entries((p.totals && p.totals.failuresByReason) || {})) counts.set(reason, (counts.get(reason) || 0) + n);
    for (const f of p.failures) list.push({ p: p.id, f });
  }
  const groups = [...counts.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([reason, n]) => el('tr', { 'data-reason': reason }, td(reason, 'mono'), td(String(n), 'num'), td(HINTS[reason] || '')));
  patchChildren(document.querySelector('#failure-groups tbody'), groups);
  const rows = list
    .sort((a, b) => b.f.at - a.f.at)
    .slice(0, SHOW)
    .map(({ p, f }) =>
      el(
        'tr',
        { 'data-proxy': p, 'data-target': f.target || '', 'data-reason': f.reason },
        td(clock(f.at)),
        td(p),
        td(f.client, 'mono'),
        td(f.target || '', 'mono'),
        el('td', {}, badge(f.reason, 'refused')),
        td(f.message),
      ),
    );
  patchChildren(document.querySelector('#failures tbody'), rows);
}

function render() {
  renderProxies();
  renderRoutes();
  renderStreams();
  renderFailures();
  window.proxyoutChart?.update(proxies);
}

const TOKEN_KEY = 'kubectl-proxyout-token';

/**
 * The token: from the URL (then out of the address bar), else from this tab's earlier load. Kept
 * in sessionStorage, which is per origin (port included); a cookie would go to every server on
 * 127.0.0.1 the browser visits.
 */
function takeToken() {
  const url = new URL(location.href);
  const given = url.searchParams.get('token');
  if (given !== null) {
    sessionStorage.setItem(TOKEN_KEY, given);
    url.searchParams.delete('token');
    history.replaceState(history.state, '', url.pathname + url.search + url.hash);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

/** A 403 to this page's token is a restarted server (a new token): a reload cannot help, so the token goes. */
async function explainClosed(token, status) {
  const asking = new AbortController();
  const res = await fetch(`/ui/events?token=${encodeURIComponent(token)}`, { signal: asking.signal, cache: 'no-store' }).catch(() => undefined);
  asking.abort();
  if (res?.status !== 403) return;
  sessionStorage.removeItem(TOKEN_KEY);
  status.textContent = 'disconnected: the proxy restarted with a new token; open the URL it printed (or run kubectl proxyout ui)';
}

function connect(token) {
  const status = document.getElementById('connection');
  if (!token) {
    document.body.classList.add('stale');
    status.className = 'badge error';
    status.textContent = 'no token: open the URL that kubectl proxyout printed';
    return;
  }
  const events = new EventSource(`/ui/events?token=${encodeURIComponent(token)}`);
  events.onopen = () => {
    // Each connection starts with a snapshot of every proxy that runs now: a fresh view, with
    // nothing left of proxies that stopped while it was away.
    proxies.clear();
    document.body.classList.remove('stale');
    status.className = 'badge live';
    status.textContent = 'live';
    scheduleRender();
  };
  events.onmessage = (e) => receive(JSON.parse(e.data));
  events.onerror = () => {
    // What the page shows is no longer followed: greyed out until the stream is back.
    document.body.classList.add('stale');
    status.className = 'badge error';
    // A server gone is retried (reconnecting). Closed for good: it answered, but not with events.
    if (events.readyState !== EventSource.CLOSED) status.textContent = 'reconnecting…';
    else {
      status.textContent = 'disconnected: reload the page';
      explainClosed(token, status);
    }
  };
}

document.getElementById('filter').addEventListener('input', scheduleRender);
document.getElementById('errors-only').addEventListener('change', scheduleRender);
// Durations move on, and a proxy that falls silent must show so within a second or two.
setInterval(scheduleRender, 1_000);
connect(takeToken());
