// ui/page/page.js, run in a vm with a minimal DOM: what the page keeps across reconnects, a
// stopping proxy, and a stream that is gone for good.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import vm from 'node:vm';
import { readFileSync } from 'node:fs';

interface FakeSource {
  readyState: number;
  onopen?: () => void;
  onerror?: () => void;
  onmessage?: (e: { data: string }) => void;
}

function loadPage() {
  const read = (file: string) => readFileSync(new URL(`../../../src/ui/page/${file}`, import.meta.url), 'utf8');
  const node = (): Record<string, unknown> => ({
    className: '',
    textContent: '',
    value: '',
    checked: false,
    append() {},
    replaceChildren() {},
    setAttribute() {},
    addEventListener() {},
    querySelector: () => node(),
  });
  const connection = node();
  const bodyClasses = new Set<string>();
  const sources: FakeSource[] = [];
  const stored = new Map<string, string>();
  const asked: string[] = [];
  const answer = { status: 200 };
  class EventSource implements FakeSource {
    static readonly CLOSED = 2;
    readyState = 0;
    constructor() {
      sources.push(this);
    }
  }
  const context = vm.createContext({
    document: {
      getElementById: (id: string) => (id === 'connection' ? connection : node()),
      querySelector: () => node(),
      createElement: () => node(),
      createTextNode: (t: string) => ({ t }),
      body: { classList: { add: (c: string) => bodyClasses.add(c), remove: (c: string) => bodyClasses.delete(c) } },
    },
    Node: function Node() {},
    EventSource,
    location: { href: 'http://127.0.0.1:8765/?token=t' },
    sessionStorage: {
      getItem: (k: string) => stored.get(k) ?? null,
      setItem: (k: string, v: string) => stored.set(k, v),
      removeItem: (k: string) => stored.delete(k),
    },
    // What the server answers the page's token once the stream closed for good.
    fetch: (url: string) => {
      asked.push(url);
      return Promise.resolve({ status: answer.status });
    },
    history: { state: null, replaceState() {} },
    URL,
    AbortController,
    requestAnimationFrame: () => {},
    setInterval: () => 0,
    window: {},
  });
  vm.runInContext(read('dom.js'), context);
  vm.runInContext(read('page.js'), context);
  const proxies = vm.runInContext('proxies', context) as Map<string, { stopping: boolean; open: Map<number, unknown> }>;
  const source = () => sources.at(-1)!;
  const deliver = (message: unknown) => source().onmessage!({ data: JSON.stringify(message) });
  const run = (code: string): unknown => vm.runInContext(code, context);
  return { proxies, source, deliver, connection, bodyClasses, stored, asked, answer, run };
}

const snapshot = (proxy: string, open: number[] = []) => ({
  type: 'snapshot',
  proxy,
  info: { pid: 1, startedAt: new Date().toISOString(), context: 'prod', namespace: 'shop', auth: false },
  routes: [{ name: 'prod', kind: 'cluster', state: 'ready' }],
  totals: {},
  open: open.map((id) => ({ id, client: 'c', target: 't', via: 'v', startedAt: Date.now() })),
  recent: [],
  failures: [],
  samples: [],
});

test('a reconnected stream is a fresh view: a proxy that stopped meanwhile is not shown live', () => {
  const page = loadPage();
  page.source().onopen!();
  page.deliver(snapshot('a1'));
  page.deliver(snapshot('b2'));
  assert.deepEqual([...page.proxies.keys()], ['a1', 'b2']);
  page.source().onerror!();
  assert.ok(page.bodyClasses.has('stale'), 'greyed out while not followed');
  assert.equal(page.connection.textContent, 'reconnecting…');
  // Back: only a1 still runs, so only its snapshot comes.
  page.source().onopen!();
  page.deliver(snapshot('a1'));
  assert.deepEqual([...page.proxies.keys()], ['a1']);
  assert.ok(!page.bodyClasses.has('stale'));
});

test('a stream closed for good says so; a stopping proxy is shown stopping until its next snapshot', () => {
  const page = loadPage();
  page.source().onopen!();
  page.deliver(snapshot('a1', [7]));
  page.deliver({ type: 'stopping', proxy: 'a1' });
  assert.equal(page.proxies.get('a1')!.stopping, true);
  page.source().readyState = 2;
  page.source().onerror!();
  assert.equal(page.connection.textContent, 'disconnected: reload the page');
  page.deliver(snapshot('a1'));
  assert.equal(page.proxies.get('a1')!.stopping, false);
  assert.equal(page.proxies.get('a1')!.open.size, 0);
});

test('a stream closed for good whose token the server now refuses (403: it restarted) says so and forgets the token', async () => {
  const page = loadPage();
  page.source().onopen!();
  page.answer.status = 403;
  page.source().readyState = 2;
  page.source().onerror!();
  assert.equal(page.connection.textContent, 'disconnected: reload the page', 'until the server has answered');
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(page.asked, ['/ui/events?token=t']);
  assert.match(String(page.connection.textContent), /^disconnected: the proxy restarted with a new token; open the URL it printed/);
  assert.equal(page.stored.size, 0, 'a reload would only be refused again');
});

test('the API round trip column is empty for a route that is down: the figure is from before', () => {
  const page = loadPage();
  const text = (route: unknown) => page.run(`roundTripText(${JSON.stringify(route)})`);
  const details = { apiRoundTrip: { ms: 12, at: new Date().toISOString() } };
  assert.equal(text({ name: 'prod', state: 'ready', details }), '12 ms');
  assert.equal(text({ name: 'prod', state: 'degraded', condition: 'down', details }), '');
  assert.equal(text({ name: 'prod', state: 'error', details }), '');
});
