// The live page as a person uses it, in real headless Chromium. In a narrow window (a phone, a
// side-by-side half of a laptop screen) the page itself never scrolls sideways — its wide tables
// and the env lines scroll within their own boxes — and each copy button stays inside its card.
// The page draws again every second: text a reader selected stays selected, and the copy button
// the keyboard reached keeps the focus and copies the env lines with Enter.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { startClusters, addWhich, type MultiCluster } from '../helpers/multi-cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { playwrightChromium } from '../helpers/chromium.js';

let multi: MultiCluster;
let proxy: ProxyProcess;
let browser: Browser | undefined;
let noBrowser = '';

before(async () => {
  multi = await startClusters(['prod']);
  await addWhich(multi.clusters[0]!);
  proxy = await startProxyProcess([
    '--kubeconfig',
    multi.kubeconfig,
    '--context',
    'prod',
    '--listen-socks',
    '127.0.0.1:0',
    '--listen-http',
    '127.0.0.1:0',
    '--shutdown-grace',
    '0',
  ]);
  const launched = await playwrightChromium();
  if (typeof launched === 'string') noBrowser = launched;
  else browser = launched;
});

after(async () => {
  await browser?.close();
  await proxy?.stop();
  await multi?.close();
});

for (const width of [360, 600]) {
  test(`in Chromium, ${width} px wide: the page does not scroll sideways, its copy buttons stay in their cards`, async (t) => {
    if (!browser) return t.skip(noBrowser);
    const line = proxy.stdout.find((l) => l.includes('live page at'));
    assert.ok(line, proxy.stdout.join('\n'));
    const context = await browser.newContext({ viewport: { width, height: 800 } });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(err.message));
    page.on('console', (m) => m.type() === 'error' && problems.push(m.text()));
    try {
      await page.goto(/live page at (\S+)/.exec(line)![1]!);
      const r = await curl(['-sS', '-x', `http://${proxy.http}`, 'http://which.shop.svc/']);
      assert.equal(r.code, 0, r.stderr);
      await page.locator('#streams tr[data-target="which.shop.svc:80"]').first().waitFor({ timeout: 5_000 });
      await page.locator('#chart canvas').first().waitFor({ timeout: 5_000 });
      await page.waitForTimeout(300);
      const scrollWidth = (await page.evaluate('document.documentElement.scrollWidth')) as number;
      assert.ok(scrollWidth <= width, `the page is ${scrollWidth} px wide in a ${width} px window`);
      const inCards = await page.evaluate(`[...document.querySelectorAll('.card')].every((card) =>
        [...card.querySelectorAll('button')].every((b) => b.getBoundingClientRect().right <= card.getBoundingClientRect().right))`);
      assert.ok(inCards, 'every copy button inside its card');
      assert.deepEqual(problems, []);
    } finally {
      await context.close();
    }
  });
}

test('in Chromium: a selection and the keyboard focus outlive the page drawing again; Enter on copy copies the env lines', async (t) => {
  if (!browser) return t.skip(noBrowser);
  const line = proxy.stdout.find((l) => l.includes('live page at'));
  const url = new URL(/live page at (\S+)/.exec(line!)![1]!);
  const context = await browser.newContext();
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: url.origin });
  const page = await context.newPage();
  try {
    await page.goto(url.href);
    const env = page.locator('.card .copy pre').first();
    await env.waitFor({ timeout: 5_000 });
    await page.locator('#routes tr[data-route="prod"][data-condition="ready"]').waitFor({ timeout: 10_000 });
    await env.selectText();
    const selected = (await page.evaluate('getSelection().toString()')) as string;
    assert.match(selected, /^export ALL_PROXY=/);
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate('document.activeElement.textContent'), 'copy', 'Tab reaches the copy button after the selection');
    // Past two of the page's one-second redraws.
    await page.waitForTimeout(2_500);
    assert.equal(await page.evaluate('document.activeElement.textContent'), 'copy', 'the focus stays on the copy button');
    await env.selectText();
    await page.waitForTimeout(2_500);
    assert.equal(await page.evaluate('getSelection().toString()'), selected, 'the selection stays');
    await page.locator('.card .copy button').first().focus();
    await page.keyboard.press('Enter');
    assert.deepEqual(
      ((await page.evaluate('navigator.clipboard.readText()')) as string).split('\n'),
      proxy.stdout.filter((l) => l.startsWith('export ')),
    );
  } finally {
    await context.close();
  }
});
