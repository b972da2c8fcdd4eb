// The live page of a foreground proxy, in real headless Chromium: the routes of a two-cluster
// table, a stream with the pod that served it within a second of a curl, a refusal with its
// reason, each route's cache counts and API round trip, a route turning degraded (shown down: new
// streams fail at once) when its API server stops; screenshots in both themes for a
// person to look at. Plain HTTP requests check the defences: no token, a foreign Host or Origin
// — all 403, never echoing the token (a peer from elsewhere: test/unit/page-access.test.ts); the
// token stays with the page in the browser, never in a cookie another port on 127.0.0.1 gets. A
// proxy stopped with SIGSTOP is shown not answering, not ready; target names with markup in them
// (a SOCKS5 name is any bytes) show as text.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { startClusters, addWhich, type MultiCluster } from '../helpers/multi-cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { playwrightChromium } from '../helpers/chromium.js';

let multi: MultiCluster;
let proxy: ProxyProcess;
let pageUrl: URL;
let browser: Browser | undefined;
let noBrowser = '';

before(async () => {
  multi = await startClusters(['prod', 'staging']);
  await addWhich(multi.clusters[0]!);
  await addWhich(multi.clusters[1]!);
  proxy = await startProxyProcess([
    '--kubeconfig',
    multi.kubeconfig,
    '--context',
    'prod',
    '--context',
    'staging',
    '--listen-socks',
    '127.0.0.1:0',
    '--listen-http',
    '127.0.0.1:0',
    '--shutdown-grace',
    '0',
  ]);
  const line = proxy.stdout.find((l) => l.includes('live page at'));
  assert.ok(line, `no page URL in the ready lines:\n${proxy.stdout.join('\n')}`);
  pageUrl = new URL(/live page at (\S+)/.exec(line)![1]!);
  const launched = await playwrightChromium();
  if (typeof launched === 'string') noBrowser = launched;
  else browser = launched;
});

after(async () => {
  await browser?.close();
  await proxy?.stop();
  await multi?.close();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A plain request to the page's listener with these headers (Host as given, not derived from the URL). */
function get(pathAndQuery: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: pageUrl.hostname, port: pageUrl.port, path: pathAndQuery, headers: { Host: pageUrl.host, ...headers } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
        // The event stream never ends: its first message is enough.
        if (res.headers['content-type']?.startsWith('text/event-stream') && body.includes('\n\ndata: ')) res.destroy();
      });
      res.on('close', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const token = () => pageUrl.searchParams.get('token')!;

test('requests without the token, with a wrong one, a foreign Host or a foreign Origin are refused with 403 that echoes nothing', async () => {
  const cases: Array<[string, string, Record<string, string>]> = [
    ['no token, events', '/ui/events', {}],
    ['a cookie instead of the token, events', '/ui/events', { Cookie: `proxyout-ui-${pageUrl.port}=${token()}; token=${token()}` }],
    ['a wrong token', `/?token=${token().slice(1)}x`, {}],
    ['a wrong token, events', `/ui/events?token=${token().slice(1)}x`, {}],
    ['a foreign Host (DNS rebinding)', `/?token=${token()}`, { Host: `evil.example:${pageUrl.port}` }],
    ['a loopback Host with another port', `/?token=${token()}`, { Host: `127.0.0.1:${Number(pageUrl.port) + 1}` }],
    ['a foreign Origin', `/ui/events?token=${token()}`, { Origin: 'http://evil.example' }],
    ['a loopback Origin with another port', `/ui/events?token=${token()}`, { Origin: `http://127.0.0.1:${Number(pageUrl.port) + 1}` }],
  ];
  for (const [what, url, headers] of cases) {
    const answer = await get(url, headers);
    assert.equal(answer.status, 403, `${what}: ${answer.status} ${answer.body}`);
    assert.match(answer.body, /^kubectl-proxyout: /, what);
    assert.ok(!answer.body.includes(token()) && !answer.body.includes('evil'), `${what}: the answer echoes the request: ${answer.body}`);
    assert.equal(answer.headers['set-cookie'], undefined, what);
  }
});

test("the page's files need no token and set no cookie; its event stream needs the token in its URL", async () => {
  for (const path of ['/', `/?token=${token()}`, '/ui/page.js']) {
    const answer = await get(path);
    assert.equal(answer.status, 200, path);
    assert.equal(answer.headers['set-cookie'], undefined, `${path}: a cookie would go to every server on 127.0.0.1`);
  }
  const page = await get('/');
  assert.match(String(page.headers['content-security-policy']), /default-src 'none'; script-src 'self'/);
  assert.match(page.body, /<title>kubectl-proxyout<\/title>/);
  const uplot = await get('/ui/uPlot.js');
  assert.match(uplot.body, /MIT License[\s\S]*var uPlot=/, 'uPlot, with its licence, from the proxy itself');
  const events = await get(`/ui/events?token=${token()}`, { Origin: `http://${pageUrl.host}` });
  assert.equal(events.status, 200);
  const snapshot = JSON.parse(/data: (.*)\n/.exec(events.body)![1]!) as { type: string; proxy: string; routes: Array<{ name: string }> };
  assert.equal(snapshot.type, 'snapshot');
  assert.deepEqual(
    snapshot.routes.map((r) => r.name),
    ['prod', 'staging'],
  );
});

test('in Chromium: the token stays with the page (a reload keeps it); another server on 127.0.0.1 the browser visits never gets it', async (t) => {
  if (!browser) return t.skip(noBrowser);
  // Another local user's server, a port mapping to a pod, a dev server: cookies for 127.0.0.1 go to every port.
  const seen: string[] = [];
  const other = http.createServer((req, res) => {
    seen.push(`${req.url}\n${JSON.stringify(req.headers)}`);
    res.writeHead(200, { 'Content-Type': 'text/html' }).end('<img src="/pixel">');
  });
  await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(pageUrl.href);
    await page.locator('#connection.live').waitFor({ timeout: 10_000 });
    assert.equal(new URL(page.url()).search, '', 'the token left the address bar');
    await page.reload();
    await page.locator('#connection.live').waitFor({ timeout: 10_000 });
    const elsewhere = await context.newPage();
    await elsewhere.goto(`http://127.0.0.1:${(other.address() as AddressInfo).port}/`);
    await elsewhere.waitForLoadState('load');
    assert.ok(
      seen.some((r) => r.startsWith('/pixel')),
      seen.join('\n'),
    );
    for (const request of seen) assert.ok(!request.includes(token()), `the token reached another port:\n${request}`);
  } finally {
    await context.close();
    other.close();
  }
});

async function screenshot(page: Page, name: string): Promise<void> {
  const file = path.join(os.tmpdir(), `proxyout-live-page-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`# screenshot of the live page (${name}): ${file}`);
}

test('in Chromium: the routes of both clusters, a stream with its pod within a second of a curl, a refusal with its reason, a stopped API server turning its route degraded', async (t) => {
  if (!browser) return t.skip(noBrowser);
  const context = await browser.newContext({ colorScheme: 'light', viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(err.message));
  page.on('console', (m) => m.type() === 'error' && problems.push(m.text()));
  try {
    await page.goto(pageUrl.href);
    assert.equal(new URL(page.url()).search, '', 'the token left the address bar');
    for (const route of ['prod', 'staging']) await page.waitForSelector(`#routes tr[data-route="${route}"][data-state="ready"]`, { timeout: 10_000 });
    // Each route's cache counts and API round trip (its watches measured it; no request of its own).
    const prodRow = page.locator('#routes tr[data-route="prod"]');
    await prodRow
      .locator('td.rtt')
      .filter({ hasText: /^\d+ ms$/ })
      .waitFor({ timeout: 5_000 });
    assert.match((await prodRow.locator('.objects').textContent()) ?? '', /\b[1-9]\d* services, [1-9]\d* endpointslices\b/);
    assert.equal(await prodRow.locator('.badge').textContent(), 'ready');
    // The env lines to copy are the ready lines' own, NO_PROXY included.
    const env = (await page.locator('.card .copy pre').first().textContent()) ?? '';
    assert.deepEqual(
      env.split('\n'),
      proxy.stdout.filter((l) => l.startsWith('export ')),
    );

    const before = Date.now();
    const r = await curl(['-sS', '-x', `http://${proxy.http}`, 'http://which.shop.svc/']);
    assert.equal(r.code, 0, r.stderr);
    const row = page.locator('#streams tr[data-target="which.shop.svc:80"]').first();
    await row.locator('td.via').filter({ hasText: 'shop/which-prod:8080' }).waitFor({ timeout: 1_000 });
    console.log(`# the stream showed ${Date.now() - before} ms after the curl started`);
    assert.equal(await row.locator('td').nth(6).textContent(), 'spdy');

    const refused = await curl(['-sS', '-o', '/dev/null', '-w', '%{http_code}', '-x', `http://${proxy.http}`, 'http://nosuch.shop.svc/']);
    assert.notEqual(refused.stdout, '200');
    const failure = page.locator('#failures tr[data-target="nosuch.shop.svc:80"]').first();
    await failure.waitFor({ timeout: 2_000 });
    const reason = await failure.getAttribute('data-reason');
    assert.match((await failure.textContent()) ?? '', new RegExp(`${reason}.*nosuch`));
    await page.locator(`#failure-groups tr[data-reason="${reason}"]`).waitFor({ timeout: 2_000 });

    await page.locator('#chart canvas').first().waitFor({ timeout: 5_000 });
    await screenshot(page, 'light');
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.waitForTimeout(300);
    await screenshot(page, 'dark');

    let bringUp!: () => void;
    const down = multi.clusters[1]!.sim.restartApiServer(new Promise<void>((resolve) => (bringUp = resolve)));
    try {
      const degraded = page.locator('#routes tr[data-route="staging"][data-state="degraded"]');
      await degraded.waitFor({ timeout: 10_000 });
      assert.match((await degraded.locator('.reason').first().textContent()) ?? '', /API server/);
      // An API server that does not answer at all: new streams fail at once, and the page says down.
      await page.locator('#routes tr[data-route="staging"][data-condition="down"]').waitFor({ timeout: 5_000 });
      assert.equal(await degraded.locator('.badge').textContent(), 'down');
      assert.equal(await page.locator('#routes tr[data-route="prod"]').getAttribute('data-state'), 'ready');
      await screenshot(page, 'degraded-dark');
    } finally {
      bringUp();
      await down;
    }
    await page.locator('#routes tr[data-route="staging"][data-state="ready"]').waitFor({ timeout: 15_000 });
    assert.deepEqual(problems, [], 'the page ran without errors');
  } finally {
    await context.close();
  }
});

test('in Chromium: a proxy that stops answering (SIGSTOP, as Ctrl-Z does) is shown so within seconds, not live and ready; live again after SIGCONT', async (t) => {
  if (!browser) return t.skip(noBrowser);
  const context = await browser.newContext();
  const pid = proxy.proc.pid!;
  try {
    const page = await context.newPage();
    await page.goto(pageUrl.href);
    await page.locator('#routes tr[data-route="prod"][data-condition="ready"]').waitFor({ timeout: 10_000 });
    process.kill(pid, 'SIGSTOP');
    try {
      const stoppedAt = Date.now();
      await page.locator('#proxies .card .badge.silent').waitFor({ timeout: 8_000 });
      console.log(`# shown not answering ${Date.now() - stoppedAt} ms after SIGSTOP`);
      assert.match((await page.locator('#proxies .card').textContent()) ?? '', /no word from the proxy for \d+ s/);
      for (const route of ['prod', 'staging'])
        assert.equal(await page.locator(`#routes tr[data-route="${route}"]`).getAttribute('data-condition'), 'unknown', route);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await page.locator('#proxies .card .badge.live').waitFor({ timeout: 5_000 });
    await page.locator('#routes tr[data-route="prod"][data-condition="ready"]').waitFor({ timeout: 5_000 });
  } finally {
    await context.close();
  }
});

test('in Chromium: target names a client chose, markup included, show as text and run nothing', async (t) => {
  if (!browser) return t.skip(noBrowser);
  const hostile = ['<img/src=x/id=pwned1/onerror=document.title=1>.shop', '"><b/id=pwned2>x</b>', "</td><script>document.title='pwned3'</script>"];
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(pageUrl.href);
    await page.locator('#connection.live').waitFor({ timeout: 10_000 });
    for (const name of hostile) {
      const r = await socks5Connect(proxy.socks!, name, 80);
      r.socket.destroy();
      assert.notEqual(r.reply, 0, name);
    }
    for (const name of hostile) {
      const row = page.locator('#failures tbody tr').filter({ has: page.locator('td.mono', { hasText: `${name}:80` }) });
      await row.first().waitFor({ timeout: 3_000 });
      assert.equal(await row.first().getAttribute('data-target'), `${name}:80`);
    }
    assert.equal(await page.locator('[id^="pwned"], #failures img, #failures script').count(), 0, 'markup from a name made elements');
    assert.equal(await page.title(), 'kubectl-proxyout', 'script from a name ran');
  } finally {
    await context.close();
  }
});

// Last: it replaces the proxy.
test('in Chromium: a proxy restarted on the same port (a new token) is shown as such, not "reload the page"', async (t) => {
  if (!browser) return t.skip(noBrowser);
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(pageUrl.href);
    await page.locator('#connection.live').waitFor({ timeout: 10_000 });
    await proxy.stop();
    proxy = await startProxyProcess([
      '--kubeconfig',
      multi.kubeconfig,
      '--context',
      'prod',
      '--listen-socks',
      '127.0.0.1:0',
      '--listen-http',
      pageUrl.host,
      '--shutdown-grace',
      '0',
    ]);
    const status = page.locator('#connection');
    // EventSource retries a server gone every few seconds; on a loaded host the new one may answer late.
    await status.filter({ hasText: /restarted with a new token/ }).waitFor({ timeout: 30_000 });
    // The old token is dropped: a reload says where a new one is, rather than a bare 403 stream.
    await page.reload();
    await status.filter({ hasText: /no token: open the URL that kubectl proxyout printed/ }).waitFor({ timeout: 5_000 });
  } finally {
    await context.close();
  }
});
