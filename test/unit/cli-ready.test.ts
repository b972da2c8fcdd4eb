import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { formatAddress, readyLines } from '../../src/cli/ready.js';
import { firstShutdownSignal } from '../../src/cli/signals.js';

const where = { context: 'sim', namespace: 'default' };

test('SOCKS only: one status line and ALL_PROXY with socks5h', () => {
  assert.deepEqual(readyLines({ ...where, socks: { address: '127.0.0.1', family: 'IPv4', port: 1080 } }), [
    'kubectl-proxyout: SOCKS5 proxy on 127.0.0.1:1080 (context sim, namespace default)',
    'export ALL_PROXY=socks5h://127.0.0.1:1080',
  ]);
});

test('both listeners: status lines first, then every export, IPv6 bracketed', () => {
  const lines = readyLines({
    context: 'prod',
    namespace: 'shop',
    socks: { address: '127.0.0.1', family: 'IPv4', port: 40000 },
    http: { address: '::1', family: 'IPv6', port: 3128 },
  });
  assert.deepEqual(lines, [
    'kubectl-proxyout: SOCKS5 proxy on 127.0.0.1:40000 (context prod, namespace shop)',
    'kubectl-proxyout: HTTP proxy on [::1]:3128 (context prod, namespace shop)',
    'export ALL_PROXY=socks5h://127.0.0.1:40000',
    'export HTTP_PROXY=http://[::1]:3128',
    'export HTTPS_PROXY=http://[::1]:3128',
    'export http_proxy=http://[::1]:3128',
    'export https_proxy=http://[::1]:3128',
  ]);
});

test('HTTP only: no ALL_PROXY', () => {
  const lines = readyLines({ ...where, http: { address: '0.0.0.0', family: 'IPv4', port: 8080 } });
  assert.ok(!lines.some((l) => l.includes('ALL_PROXY')));
  assert.ok(lines.includes('export HTTPS_PROXY=http://0.0.0.0:8080'));
});

test('formatAddress brackets only IPv6', () => {
  assert.equal(formatAddress({ address: '::', port: 1 }), '[::]:1');
  assert.equal(formatAddress({ address: '::ffff:127.0.0.1', port: 2 }), '[::ffff:127.0.0.1]:2');
  assert.equal(formatAddress({ address: '10.0.0.1', port: 3 }), '10.0.0.1:3');
});

test('first signal resolves, a second one exits at once with 128+signo', async () => {
  const emitter = new EventEmitter();
  const exits: number[] = [];
  const first = firstShutdownSignal({ emitter, exitNow: (code) => void exits.push(code) });
  emitter.emit('SIGTERM', 'SIGTERM');
  assert.equal(await first, 'SIGTERM');
  assert.deepEqual(exits, []);
  emitter.emit('SIGINT', 'SIGINT');
  assert.deepEqual(exits, [130]);
});

test('generated credentials go into every exported proxy URL; chosen ones never do', () => {
  const running = { ...where, socks: { address: '127.0.0.1', family: 'IPv4', port: 1080 }, http: { address: '127.0.0.1', family: 'IPv4', port: 3128 } };
  const generated = readyLines(running, 'proxyout', 'pw_x-1');
  assert.ok(generated.includes('export ALL_PROXY=socks5h://proxyout:pw_x-1@127.0.0.1:1080'));
  for (const v of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) assert.ok(generated.includes(`export ${v}=http://proxyout:pw_x-1@127.0.0.1:3128`), v);
  assert.ok(generated.some((l) => /generated password for user proxyout/.test(l)));
  const chosen = readyLines(running, 'me');
  assert.ok(chosen.includes('export ALL_PROXY=socks5h://127.0.0.1:1080'));
  assert.ok(chosen.some((l) => l.includes('socks5h://me:PASSWORD@')));
});
