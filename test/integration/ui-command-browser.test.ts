// `kubectl proxyout ui` in real headless Chromium, with two managed proxies (one per cluster of
// the simulator): the page shows both, each with its routes; a stream through one shows on that
// proxy's row with the pod that served it; a proxy that disconnects shows as gone, its route down,
// while the other stays live. A screenshot is written for a person to look at. Opened the way
// `ui` opens it (its redirect file, through the platform's opener), the page is live at once.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { startClusters, addWhich, type MultiCluster } from '../helpers/multi-cluster.js';
import { curl } from '../helpers/curl.js';
import { playwrightChromium } from '../helpers/chromium.js';
import { managedCli, startUi, type Connected, type UiCommand } from '../helpers/managed-proxies.js';

let multi: MultiCluster;
let stateDir: string;
let managed: ReturnType<typeof managedCli>;
let ui: UiCommand | undefined;
let browser: Browser | undefined;
let noBrowser = '';
const proxies: Record<string, Connected> = {};

before(async () => {
  multi = await startClusters(['prod', 'staging']);
  for (const c of multi.clusters) await addWhich(c);
  stateDir = mkdtempSync(path.join(os.tmpdir(), 'proxyout-state-'));
  managed = managedCli(stateDir);
  for (const context of ['prod', 'staging']) proxies[context] = await managed.connect(multi.kubeconfig, context);
  ui = await startUi(managed.env);
  const launched = await playwrightChromium();
  if (typeof launched === 'string') noBrowser = launched;
  else browser = launched;
});

after(async () => {
  await browser?.close();
  await ui?.stop();
  await managed?.cli(['quit']);
  rmSync(stateDir, { recursive: true, force: true });
  await multi?.close();
});

test('in Chromium: both managed proxies with their routes, a stream with its pod on its own proxy, a disconnected proxy gone and its route down', async (t) => {
  if (!browser) return t.skip(noBrowser);
  const prod = proxies.prod!;
  const staging = proxies.staging!;
  const context = await browser.newContext({ colorScheme: 'light', viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(err.message));
  page.on('console', (m) => m.type() === 'error' && problems.push(m.text()));
  try {
    await page.goto(ui!.url.href);
    for (const [name, p] of Object.entries(proxies)) {
      const card = page.locator(`#proxies .card[data-proxy="${p.id}"]`);
      await card.locator('.badge.live').waitFor({ timeout: 10_000 });
      assert.match((await card.textContent()) ?? '', new RegExp(`context${name}, namespace shop[\\s\\S]*HTTP${p.http.replace(/\./g, '\\.')}`));
      await page.locator(`#routes tr[data-proxy="${p.id}"][data-route="${name}"][data-condition="ready"]`).waitFor({ timeout: 10_000 });
    }

    const r = await curl(['-sS', '-x', `http://${staging.http}`, 'http://which.shop.svc/']);
    assert.equal(r.code, 0, r.stderr);
    const row = page.locator(`#streams tr[data-proxy="${staging.id}"][data-target="which.shop.svc:80"]`).first();
    await row.locator('td.via').filter({ hasText: 'shop/which-staging:8080' }).waitFor({ timeout: 3_000 });
    assert.equal(await page.locator(`#streams tr[data-proxy="${prod.id}"]`).count(), 0, 'the other proxy carried nothing');

    const gone = await managed.cli(['disconnect', prod.id]);
    assert.equal(gone.code, 0, gone.stderr);
    await page.locator(`#proxies .card[data-proxy="${prod.id}"] .badge.gone`).waitFor({ timeout: 10_000 });
    const route = page.locator(`#routes tr[data-proxy="${prod.id}"][data-route="prod"]`);
    assert.equal(await route.getAttribute('data-condition'), 'down');
    assert.match((await route.locator('.reason').first().textContent()) ?? '', /^proxy gone: /);
    assert.equal(await page.locator(`#proxies .card[data-proxy="${staging.id}"] .badge.live`).count(), 1, 'the other proxy is still live');

    const file = path.join(os.tmpdir(), 'proxyout-ui-command.png');
    await page.screenshot({ path: file, fullPage: true });
    console.log(`# screenshot of the ui command's page: ${file}`);
    assert.deepEqual(problems, [], 'the page ran without errors');
  } finally {
    await context.close();
  }
});

test('in Chromium: opened by `ui` itself, through its redirect file, the page is live without a reload', async (t) => {
  if (!browser) return t.skip(noBrowser);
  // An opener that only notes what it was given: the test's browser then opens that.
  const bin = mkdtempSync(path.join(os.tmpdir(), 'proxyout-opener-'));
  const opened = path.join(bin, 'opened');
  writeFileSync(path.join(bin, 'xdg-open'), `#!/bin/sh\nprintf '%s' "$1" > '${opened}'\n`);
  chmodSync(path.join(bin, 'xdg-open'), 0o755);
  const own = await startUi({ ...managed.env, PATH: `${bin}:${process.env.PATH}` }, true);
  const context = await browser.newContext();
  try {
    const deadline = Date.now() + 5_000;
    while (!existsSync(opened) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const file = readFileSync(opened, 'utf8');
    assert.match(file, /^file:\/\//, 'the opener gets the redirect file, never the URL with its token');
    const page = await context.newPage();
    await page.goto(file);
    await page.locator('#connection.live').waitFor({ timeout: 10_000 });
    assert.equal(new URL(page.url()).search, '', 'the token left the address bar');
    await page.locator(`#proxies .card[data-proxy="${proxies.staging!.id}"] .badge.live`).waitFor({ timeout: 10_000 });
  } finally {
    await context.close();
    await own.stop();
    rmSync(bin, { recursive: true, force: true });
  }
});
