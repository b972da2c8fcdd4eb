// `ui` beside a daemon an earlier version started (before the live feed): its control socket
// answers `watch` with "unknown command". The page says once what it is and what to do, and does
// not follow it again at every rescan. Beside one a newer version started (a state.json it cannot
// read) it says so once, and still shows the others.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ensureStateDir, layout } from '../../src/state/paths.js';
import { writeEntry } from '../../src/managed/store.js';
import { processIdentity } from '../../src/state/process.js';
import { managedHub } from '../../src/managed/ui.js';
import type { PageMessage } from '../../src/ui/page-server.js';
import { proxyEntry } from '../helpers/proxy-entry.js';

// What such a daemon's control socket did: status answered, any other command refused.
const EARLIER_DAEMON = `
const net = require('node:net');
let watches = 0;
net.createServer((s) => {
  s.setEncoding('utf8');
  s.on('data', (d) => {
    const cmd = JSON.parse(d.split('\\n')[0]).cmd;
    if (cmd === 'watch') watches++;
    s.end(JSON.stringify({ ok: false, error: 'unknown command ' + JSON.stringify(cmd) }) + '\\n');
  });
}).listen(process.env.SOCK, () => process.stdout.write('up\\n'));
process.on('SIGUSR2', () => process.stdout.write('watches=' + watches + '\\n'));
`;

async function earlierDaemon(t: { after(fn: () => void): void }) {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-ui-earlier-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const l = layout(path.join(dir, 'state'));
  ensureStateDir(l);
  const id = 'earlier';
  writeEntry(l, proxyEntry(id, { phase: 'starting' }));
  const script = path.join(dir, 'kubectl-proxyout');
  writeFileSync(script, EARLIER_DAEMON);
  const child = spawn(process.execPath, [script, 'daemon', '--id', id], {
    stdio: ['ignore', 'pipe', 'ignore'],
    env: { ...process.env, SOCK: l.controlSocket(id) },
  });
  t.after(() => child.kill('SIGKILL'));
  child.stdout.setEncoding('utf8');
  await once(child.stdout, 'data');
  writeEntry(l, proxyEntry(id, { phase: 'running', pid: child.pid, procIdentity: processIdentity(child.pid!) }));
  return { l, child };
}

test('a daemon without the live feed is said to be from an earlier version once, not followed at every rescan', async (t) => {
  const { l, child } = await earlierDaemon(t);
  const messages: PageMessage[] = [];
  const stop = managedHub(l, 100).subscribe((m) => messages.push(m));
  await new Promise((r) => setTimeout(r, 1_500));
  stop();

  const gone = messages.filter((m) => m.type === 'gone');
  assert.equal(gone.length, 1, `said once in 15 rescans: ${JSON.stringify(gone)}`);
  const reason = gone[0]?.type === 'gone' ? gone[0].reason : '';
  assert.match(reason, /started by an earlier kubectl-proxyout, which has no live feed/);
  assert.match(reason, /kubectl proxyout disconnect earlier, then connect/);
  child.kill('SIGUSR2');
  const [line] = (await once(child.stdout, 'data')) as [string];
  assert.equal(line.trim(), 'watches=1', 'its socket was asked for the feed once');
});

test("a newer version's proxy is said once, and the others are still followed", async (t) => {
  const { l } = await earlierDaemon(t);
  writeEntry(l, proxyEntry('later', { phase: 'running', pid: process.pid }));
  const file = l.stateFile('later');
  writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, 'utf8')), version: 2 }));

  const messages: PageMessage[] = [];
  const stop = managedHub(l, 100).subscribe((m) => messages.push(m));
  await new Promise((r) => setTimeout(r, 1_000));
  stop();

  const reasons = (id: string) => messages.flatMap((m) => (m.type === 'gone' && m.proxy === id ? [m.reason] : []));
  assert.deepEqual(reasons('later'), [
    'not shown: proxy later was started by a newer kubectl-proxyout (its state.json is version 2; this one knows version 1): manage it with that version, the kubectl-proxyout that started it',
  ]);
  assert.equal(reasons('earlier').length, 1, 'the other proxy was still asked for its feed');
});
