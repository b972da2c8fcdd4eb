import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { execFileSync } from 'node:child_process';
import { readyLines } from '../../src/cli/ready.js';
import { exportedVariables, unixSocksUrl } from '../../src/proxy/client-env.js';
import { formatAddress } from '../../src/listeners/bound-address.js';
import { firstShutdownSignal } from '../../src/cli/signals.js';

const where = { context: 'sim', namespace: 'default' };
// NO_PROXY keeps the caller's entries (proxy/client-env.ts): these tests start from none.
delete process.env.NO_PROXY;
delete process.env.no_proxy;

test('SOCKS only: one status line and ALL_PROXY with socks5h', () => {
  assert.deepEqual(readyLines({ ...where, socks: { address: '127.0.0.1', family: 'IPv4', port: 1080 } }), [
    'kubectl-proxyout: SOCKS5 proxy on 127.0.0.1:1080 (context sim, namespace default)',
    'export ALL_PROXY=socks5h://127.0.0.1:1080',
    'export all_proxy=socks5h://127.0.0.1:1080',
    "export NO_PROXY='localhost,127.0.0.1,::1,[::1]'",
    "export no_proxy='localhost,127.0.0.1,::1,[::1]'",
    'unset HTTP_PROXY HTTPS_PROXY http_proxy https_proxy',
  ]);
});

test("pasted into a shell with a corporate proxy's variables, the lines send curl to this proxy", () => {
  const lines = readyLines({ ...where, socks: { address: '127.0.0.1', family: 'IPv4', port: 1 } }).filter((l) => !l.startsWith('kubectl-proxyout:'));
  // curl reads an inherited all_proxy before ALL_PROXY, and http_proxy before either.
  const inherited = { ...process.env, all_proxy: 'socks5h://127.0.0.1:2', http_proxy: 'http://127.0.0.1:3', HTTPS_PROXY: 'http://127.0.0.1:3' };
  for (const url of ['http://web.shop.svc:8080/', 'https://web.shop.svc/']) {
    const script = `${lines.join('\n')}\ncurl -sv --max-time 2 ${url} 2>&1 || true`;
    const out = execFileSync('sh', ['-c', script], { encoding: 'utf8', env: inherited });
    assert.match(out, /Trying 127\.0\.0\.1:1\.\.\./, `${url}\n${out}`);
  }
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
    'export all_proxy=socks5h://127.0.0.1:40000',
    // Brackets are a shell pattern (dash expands them in export's arguments): quoted.
    "export HTTP_PROXY='http://[::1]:3128'",
    "export HTTPS_PROXY='http://[::1]:3128'",
    "export http_proxy='http://[::1]:3128'",
    "export https_proxy='http://[::1]:3128'",
    "export NO_PROXY='localhost,127.0.0.1,::1,[::1]'",
    "export no_proxy='localhost,127.0.0.1,::1,[::1]'",
  ]);
});

test('HTTP only: no ALL_PROXY', () => {
  const lines = readyLines({ ...where, http: { address: '0.0.0.0', family: 'IPv4', port: 8080 } });
  assert.ok(!lines.some((l) => /ALL_PROXY|all_proxy|unset/.test(l)));
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
  for (const v of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'])
    assert.ok(generated.includes(`export ${v}=http://proxyout:pw_x-1@127.0.0.1:3128`), v);
  assert.ok(generated.some((l) => /generated password for user proxyout/.test(l)));
  const chosen = readyLines(running, 'me');
  assert.ok(chosen.includes('export ALL_PROXY=socks5h://127.0.0.1:1080'));
  assert.ok(chosen.some((l) => l.includes('socks5h://me:PASSWORD@')));
});

test('a unix socket path a URL cannot carry raw is percent-encoded in ALL_PROXY (curl decodes it); non-ASCII gets a warning', () => {
  const file = "/home/a b/Application Support/50%#?'$(x)/s.sock";
  assert.equal(unixSocksUrl(file), 'socks5h://localhost/home/a%20b/Application%20Support/50%25%23%3F%27%24%28x%29/s.sock');
  assert.equal(
    unixSocksUrl('/run/user/1000/kubectl-proxyout/socks.sock'),
    'socks5h://localhost/run/user/1000/kubectl-proxyout/socks.sock',
    'a plain path stays as it is',
  );
  assert.equal(decodeURIComponent(unixSocksUrl(file).slice('socks5h://localhost'.length)), file);
  assert.equal(unixSocksUrl('/home/josé/s.sock'), 'socks5h://localhost/home/jos%C3%A9/s.sock');
  const plain = readyLines({ ...where, socks: { address: file, family: 'unix', port: 0 } });
  assert.ok(!plain.some((l) => /curl cannot use/.test(l)));
  const accented = readyLines({ ...where, socks: { address: '/home/josé/s.sock', family: 'unix', port: 0 } });
  assert.ok(
    accented.some((l) => /curl cannot use this socket/.test(l)),
    accented.join('\n'),
  );
});

test('every export line, run by a real sh, sets exactly the value (quoted when it holds shell characters)', () => {
  const views = [
    { ...where, socks: { address: "/tmp/a b/it's $(x) `y` [z]*.sock", family: 'unix', port: 0 } },
    { ...where, socks: { address: '::1', family: 'IPv6', port: 1080 }, http: { address: '::1', family: 'IPv6', port: 3128 } },
  ];
  for (const view of views) {
    for (const [user, password] of [
      [undefined, undefined],
      ["o'b(r)$x", 'p w!*'],
    ] as const) {
      const vars = exportedVariables(view, user, password);
      const lines = readyLines(view, user, password).filter((l) => l.startsWith('export '));
      assert.equal(lines.length, Object.keys(vars).length);
      for (const [name, value] of Object.entries(vars)) {
        const line = lines.find((l) => l.startsWith(`export ${name}=`))!;
        assert.equal(execFileSync('sh', ['-c', `${line}\nprintf %s "$${name}"`], { encoding: 'utf8', cwd: '/' }), value, line);
      }
    }
  }
});
