// Proxy authentication end to end: the real CLI with credentials from a file, the environment
// and argv; SOCKS5 (RFC 1929) and HTTP (Basic, 407) through real curl; SOCKS4 refused; and the
// refusal to listen off loopback without credentials. Everything listens on 127.0.0.1.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { Reader, splitHostPort } from '../helpers/socks-client.js';

const USER = 'alice';
const PASSWORD = 'p4ss:w0rd-with-colon';
const url = 'http://web.shop:8080/';

let cluster: TestCluster;
let proxy: ProxyProcess;
let authFile: string;

before(async () => {
  cluster = await startTestCluster();
  authFile = path.join(cluster.dir, 'proxy-auth');
  writeFileSync(authFile, `${USER}:${PASSWORD}\nignored second line\n`, { mode: 0o600 });
  proxy = await startProxyProcess([
    '--kubeconfig',
    cluster.kubeconfig,
    '--listen-socks',
    '127.0.0.1:0',
    '--listen-http',
    '127.0.0.1:0',
    '--proxy-auth-file',
    authFile,
  ]);
});

after(async () => {
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  await proxy?.stop();
  await cluster?.close();
});

/** Raw bytes to the SOCKS port; everything the proxy sends until it closes (or 3 s pass). */
async function exchange(chunks: Buffer[]): Promise<Buffer> {
  const [host, port] = splitHostPort(proxy.socks!);
  const s = net.connect(port, host);
  s.on('error', () => undefined);
  await once(s, 'connect');
  const reader = new Reader(s);
  for (const c of chunks) s.write(c);
  let bound: NodeJS.Timeout | undefined;
  const out = await Promise.race([reader.readAll(), new Promise<Buffer>((r) => (bound = setTimeout(() => r(reader.detach()), 3000)))]);
  clearTimeout(bound); // left running, it would keep the file's process alive after its last test
  s.destroy();
  return out;
}

const rfc1929 = (user: string, pass: string) =>
  Buffer.concat([Buffer.from([1, Buffer.byteLength(user)]), Buffer.from(user), Buffer.from([Buffer.byteLength(pass)]), Buffer.from(pass)]);

describe('SOCKS5 with RFC 1929 username/password', () => {
  test('the right credentials reach the cluster (curl socks5h://user:pass@)', async () => {
    const r = await curl(['--proxy', `socks5h://${USER}:${encodeURIComponent(PASSWORD)}@${proxy.socks}`, url]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /hello from web-/);
  });

  test('no credentials, wrong password, wrong user: refused, and logged without the password', async () => {
    const none = await curl(['--proxy', `socks5h://${proxy.socks}`, url]);
    assert.notEqual(none.code, 0);
    const wrong = await curl(['--proxy', `socks5h://${USER}:nope@${proxy.socks}`, url]);
    assert.notEqual(wrong.code, 0);
    // On the wire: method 0x02 chosen, then status 0x01 and close (RFC 1929 §2).
    assert.deepEqual([...(await exchange([Buffer.from([5, 2, 0, 2]), rfc1929('mallory', PASSWORD)]))], [5, 2, 1, 1]);
    assert.deepEqual([...(await exchange([Buffer.from([5, 1, 0])]))], [5, 0xff]);
    // The proxy logs asynchronously: wait for the lines rather than race them.
    const failures = await eventually(async () => {
      const lines = proxy.logs.filter((l) => l.reason === 'auth-failed');
      return lines.length >= 4 && lines;
    });
    assert.ok(failures.some((l) => /wrong proxy user name or password/.test(String(l.msg))));
    assert.ok(!proxy.stderr().includes(PASSWORD));
  });

  test('SOCKS4 and SOCKS4a cannot carry a password: 0x5B', async () => {
    const r = await curl(['--proxy', `socks4a://${proxy.socks}`, url]);
    assert.notEqual(r.code, 0);
    const socks4a = Buffer.concat([Buffer.from([4, 1, 0x1f, 0x90, 0, 0, 0, 1]), Buffer.from(`${USER}\0web.shop\0`)]);
    const reply = await exchange([socks4a]);
    assert.equal(reply[1], 0x5b);
  });
});

describe('HTTP proxy with Proxy-Authorization: Basic', () => {
  const status = async (args: string[]) => {
    // -D - shows the proxy's own answer, CONNECT's included (curl's %{http_code} does not).
    const r = await curl(['-o', '/dev/null', '-D', '-', ...args]);
    return { code: Number(/^HTTP\/1\.1 (\d{3})/.exec(r.stdout)?.[1]), headers: r.stdout };
  };

  test('absolute-form and CONNECT with the right credentials', async () => {
    for (const extra of [[], ['-p']]) {
      const r = await curl([...extra, '-x', `http://${proxy.http}`, '--proxy-user', `${USER}:${PASSWORD}`, url]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /hello from web-/);
    }
  });

  test('missing or wrong credentials: 407 with Proxy-Authenticate, for CONNECT too', async () => {
    for (const extra of [[], ['-p']]) {
      for (const creds of [[], ['--proxy-user', `${USER}:wrong`], ['--proxy-user', `bob:${PASSWORD}`]]) {
        const r = await status([...extra, '-x', `http://${proxy.http}`, ...creds, url]);
        assert.equal(r.code, 407, `${extra} ${creds}: ${r.headers}`);
        assert.match(r.headers, /^Proxy-Authenticate: Basic realm="kubectl-proxyout", charset="UTF-8"\r?$/im);
      }
    }
  });

  test('an upload expecting 100-continue without credentials: 407 before the body, no 100', async () => {
    const r = await curl([
      '-v',
      '-o',
      '/dev/null',
      '-D',
      '-',
      '-x',
      `http://${proxy.http}`,
      '--expect100-timeout',
      '30',
      '-H',
      'Expect: 100-continue',
      '--data-binary',
      'x'.repeat(64 * 1024),
      url,
    ]);
    assert.match(r.stdout, /^HTTP\/1\.1 407 /);
    assert.doesNotMatch(r.stderr, /100 Continue/);
    assert.doesNotMatch(r.stderr, /upload completely sent/, 'the body was never sent');
  });

  test('the credentials are not forwarded to the origin', async () => {
    const r = await curl(['-x', `http://${proxy.http}`, '--proxy-user', `${USER}:${PASSWORD}`, 'http://web.shop:8080/whoami']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /"headers"/);
    assert.doesNotMatch(r.stdout, /proxy-authorization/i);
  });
});

// CLI start-up costs a second or more, so only what units cannot show runs as a process here:
// the environment alone is exercised by the managed session in no-secrets.test.ts, malformed
// values and other addresses by test/unit/proxy-auth.test.ts.
describe('password guessing is slowed down (auth/throttle.ts)', () => {
  const timed = async <T>(f: () => Promise<T>): Promise<{ value: T; ms: number }> => {
    const t0 = Date.now();
    const value = await f();
    return { value, ms: Date.now() - t0 };
  };

  test('a wrong password is answered after ~1 s, at most 4 at a time per source (the rest queue); a right one passes meanwhile', async () => {
    await new Promise((r) => setTimeout(r, 1_200)); // earlier tests' wrong answers have drained
    const wrong = () => timed(() => exchange([Buffer.from([5, 1, 2]), rfc1929(USER, 'guess')]));
    const pending = Promise.all(Array.from({ length: 6 }, wrong));
    await new Promise((r) => setTimeout(r, 300)); // all six checked and waiting
    // No lockout: with wrong answers pending from loopback, the right password passes.
    const r = await curl(['--proxy', `socks5h://${USER}:${encodeURIComponent(PASSWORD)}@${proxy.socks}`, url]);
    assert.equal(r.code, 0, r.stderr);
    const answers = await pending;
    for (const a of answers) assert.deepEqual([...a.value], [5, 2, 1, 1], 'every wrong attempt is refused with RFC 1929 status 1');
    // Lower bounds only (timers never fire early): four run at once, two wait their turn.
    const ms = answers.map((a) => a.ms).sort((x, y) => x - y);
    assert.ok(ms[0]! >= 900, `answers waited: ${ms.join(', ')} ms`);
    assert.ok(ms[4]! >= 1_900 && ms[5]! >= 1_900, `the fifth and sixth queued: ${ms.join(', ')} ms`);
  });

  test("HTTP: wrong credentials wait for their 407, missing ones (a browser's first try) do not count", async () => {
    await new Promise((r) => setTimeout(r, 1_200));
    const wrong = await timed(() => curl(['-o', '/dev/null', '-w', '%{http_code}', '-x', `http://${proxy.http}`, '--proxy-user', `${USER}:guess`, url]));
    assert.equal(wrong.value.stdout, '407');
    assert.ok(wrong.ms >= 900, `answered after ${wrong.ms} ms`);
    // Missing credentials are a challenge, not a guess: many at once are answered 407 asking for
    // credentials (not "too many"), and the right ones still pass straight after.
    const missing = await Promise.all(Array.from({ length: 8 }, () => curl(['-s', '-w', '\n%{http_code}', '-x', `http://${proxy.http}`, url])));
    for (const m of missing) {
      assert.match(m.stdout, /\n407$/);
      assert.match(m.stdout, /send proxy credentials/);
    }
    const right = await curl(['-x', `http://${proxy.http}`, '--proxy-user', `${USER}:${PASSWORD}`, url]);
    assert.equal(right.code, 0, right.stderr);
    assert.match(right.stdout, /hello from web-/);
    assert.ok(!proxy.stderr().includes('guess'));
  });
});

describe('where the credentials come from', () => {
  test('--proxy-auth on argv wins over the environment, works, and warns that ps shows it', async () => {
    const p = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--proxy-auth', 'dave:argv-secret'], {
      env: { KUBECTL_PROXYOUT_PROXY_AUTH: 'carol:env-secret' },
    });
    try {
      assert.ok(
        p.stdout.some((l) => /proxy authentication is on.*dave:PASSWORD@/.test(l)),
        p.stdout.join('\n'),
      );
      assert.equal((await curl(['--proxy', `socks5h://dave:argv-secret@${p.socks}`, url])).code, 0);
      assert.notEqual((await curl(['--proxy', `socks5h://carol:env-secret@${p.socks}`, url])).code, 0);
      await eventually(async () => p.logs.some((l) => l.level === 40 && /command line.*ps/.test(String(l.msg))));
    } finally {
      await p.stop();
    }
  });

  test('a password with letters outside ASCII passes in UTF-8 and in ISO-8859-1 (Python requests, Java), over both listeners', async () => {
    const file = path.join(cluster.dir, 'umlaut-auth');
    writeFileSync(file, 'jörg:pässwörd\n', { mode: 0o600 });
    const p = await startProxyProcess([
      '--kubeconfig',
      cluster.kubeconfig,
      '--listen-socks',
      '127.0.0.1:0',
      '--listen-http',
      '127.0.0.1:0',
      '--proxy-auth-file',
      file,
    ]);
    try {
      // curl sends the user info's bytes as they are: %XX of UTF-8, or of ISO-8859-1.
      const utf8 = 'j%C3%B6rg:p%C3%A4ssw%C3%B6rd';
      const latin1 = 'j%F6rg:p%E4ssw%F6rd';
      for (const userinfo of [utf8, latin1]) {
        assert.equal((await curl(['--proxy', `socks5h://${userinfo}@${p.socks}`, url])).code, 0, `SOCKS5 ${userinfo}`);
        assert.equal((await curl(['--proxy', `http://${userinfo}@${p.http}`, url])).code, 0, `HTTP ${userinfo}`);
      }
      const wrong = await curl(['-o', '/dev/null', '-w', '%{http_code}', '--proxy', `http://j%F6rg:p%E4ssw%F6rt@${p.http}`, url]);
      assert.equal(wrong.stdout, '407');
    } finally {
      await p.stop();
    }
  });

  test('a credentials file others can read is refused in one line, without its content', async () => {
    const loose = path.join(cluster.dir, 'loose-auth');
    writeFileSync(loose, 'eve:secret\n');
    chmodSync(loose, 0o644);
    const r = await runCli(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--proxy-auth-file', loose]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^Error: --proxy-auth-file .*loose-auth: refusing a file that group or others can access \(mode 644\); run chmod 600 \S+\n$/);
    assert.doesNotMatch(r.stderr, /secret/);
  });

  test('one in a Kubernetes Secret volume (read-only, 0644 by default) is told what can close it, not chmod', async () => {
    // The kubelet's layout: FILE → ..data/FILE, ..data → ..<timestamp>/ holding the file.
    const volume = path.join(cluster.dir, 'secret-volume');
    mkdirSync(path.join(volume, '..2026_01_01_00_00_00.000000001'), { recursive: true });
    writeFileSync(path.join(volume, '..2026_01_01_00_00_00.000000001', 'auth'), 'eve:secret\n', { mode: 0o644 });
    symlinkSync('..2026_01_01_00_00_00.000000001', path.join(volume, '..data'));
    symlinkSync('..data/auth', path.join(volume, 'auth'));
    const r = await runCli(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '0.0.0.0:0', '--proxy-auth-file', path.join(volume, 'auth')]);
    assert.equal(r.code, 1);
    assert.match(
      r.stderr,
      /^Error: --proxy-auth-file .*auth: refusing a file that group or others can access \(mode 644\); it is in a Kubernetes Secret volume, which chmod cannot change: set the volume's defaultMode to 0400, or pass the credentials in \$KUBECTL_PROXYOUT_PROXY_AUTH \(env valueFrom secretKeyRef\)\n$/,
    );
  });
});

describe('listening beyond loopback', () => {
  test('without credentials: one line saying how to add them, before anything binds (serve and connect)', async () => {
    const kc = ['--kubeconfig', cluster.kubeconfig];
    const runs = await Promise.all([
      runCli([...kc, '--listen-socks', '127.0.0.1:0', '--listen-http', '0.0.0.0:0']),
      runCli(['connect', ...kc, '--listen-socks', '0.0.0.0:0'], { env: { KUBECTL_PROXYOUT_STATE_DIR: path.join(cluster.dir, 'state') } }),
    ]);
    for (const [i, r] of runs.entries()) {
      assert.equal(r.code, 1, `run ${i}: ${r.stderr}`);
      assert.match(
        r.stderr,
        /^Error: --listen-(socks|http) 0\.0\.0\.0:0 is not a loopback address.*--proxy-auth-file FILE.*KUBECTL_PROXYOUT_PROXY_AUTH=user:password\n$/,
        `run ${i}`,
      );
    }
  });
});
