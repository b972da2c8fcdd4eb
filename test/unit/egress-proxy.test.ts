import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadExtraCA, noProxyMatcher, proxyFromEnvironment, redact } from '../../src/cluster/egress-proxy.js';
import { SimPki } from '../sim/pki.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { scratchDir } from '../helpers/scratch-dir.js';

// Cases from golang.org/x/net/http/httpproxy proxy_test.go (TestUseProxy / useProxyTests).
test('NO_PROXY as httpproxy reads it: domains and their subdomains, .suffixes, *.suffixes, host:port', () => {
  const skip = noProxyMatcher('foobar.com, .barbaz.net, *.wildcard.org, example.com:8080, Bar.Example');
  const direct = (host: string, port = '443') => skip(host, port);
  assert.equal(direct('foobar.com'), true);
  assert.equal(direct('www.foobar.com'), true);
  assert.equal(direct('xfoobar.com'), false, 'whole labels only');
  assert.equal(direct('barbaz.net'), false, '".barbaz.net" does not match barbaz.net itself');
  assert.equal(direct('www.barbaz.net'), true);
  assert.equal(direct('wildcard.org'), false);
  assert.equal(direct('a.wildcard.org'), true);
  assert.equal(direct('example.com', '8080'), true);
  assert.equal(direct('example.com', '443'), false, 'the port must match when given');
  assert.equal(direct('api.bar.example'), true, 'entries are case-insensitive');
  assert.equal(direct('FOOBAR.COM'), true);
});

test('NO_PROXY IPs and CIDRs match IP literals only; "*" matches everything; empty entries are skipped', () => {
  const skip = noProxyMatcher('10.0.0.0/8, 192.168.1.1, 172.16.1.2:6443, [fd00::1]:443, 2001:db8::/32, 10.1.2.3/16, ,');
  assert.equal(skip('10.200.0.7', '6443'), true);
  assert.equal(skip('192.168.1.1', '1'), true);
  assert.equal(skip('192.168.1.2', '1'), false);
  assert.equal(skip('172.16.1.2', '6443'), true);
  assert.equal(skip('172.16.1.2', '443'), false);
  assert.equal(skip('[fd00::1]', '443'), true);
  assert.equal(skip('2001:db8:1::5', '443'), true);
  assert.equal(skip('ten.example', '443'), false);
  assert.equal(noProxyMatcher('*')('anything.example', '1'), true);
  assert.equal(noProxyMatcher(' , ')('anything.example', '1'), false);
});

// Compared with Go 1.26's http.ProxyFromEnvironment (what kubectl runs) on the same values.
test('NO_PROXY as Go reads IPv6 forms: "[addr]" without a port is no IP; IPv4-mapped blocks hold IPv4 addresses', () => {
  const proxied = (noProxy: string, server: string) =>
    proxyFromEnvironment(new URL(server), { HTTPS_PROXY: 'http://p:3128', NO_PROXY: noProxy }).proxy !== undefined;
  assert.equal(proxied('[fd00::1]', 'https://[fd00::1]:6443'), true, 'kubectl asks the proxy: net.SplitHostPort fails, and "[fd00::1]" is no IP');
  assert.equal(proxied('fd00::1', 'https://[fd00::1]:6443'), false);
  assert.equal(proxied('[fd00::1]:6443', 'https://[fd00::1]:6443'), false);
  assert.equal(proxied('::ffff:10.0.0.0/104', 'https://10.1.2.3:6443'), false, 'the block is 10.0.0.0/8');
  assert.equal(proxied('::ffff:10.0.0.0/104', 'https://[::ffff:10.1.2.3]:6443'), false);
  assert.equal(proxied('::ffff:10.0.0.0/104', 'https://11.1.2.3:6443'), true);
  assert.equal(proxied('::ffff:0.0.0.0/80', 'https://10.1.2.3:6443'), true, 'shorter than /96: an IPv6 block');
  assert.equal(proxied('::ffff:0.0.0.0/80', 'https://[::5]:6443'), false);
});

test('NO_PROXY non-ASCII entries match the punycode names of server URLs, as Go reads them', () => {
  const proxied = (noProxy: string, server: string) =>
    proxyFromEnvironment(new URL(server), { HTTPS_PROXY: 'http://p:3128', NO_PROXY: noProxy }).proxy !== undefined;
  assert.equal(proxied('bücher.example', 'https://bücher.example:6443'), false);
  assert.equal(proxied('bücher.example', 'https://api.xn--bcher-kva.example:6443'), false);
  assert.equal(proxied('.Straße.de', 'https://api.straße.de'), false);
  assert.equal(proxied('.Straße.de', 'https://api.strasse.de'), true, 'UTS 46 nontransitional: ß is not ss');
  assert.equal(proxied('a_b.example', 'https://x.a_b.example'), false, 'an entry IDNA refuses stays as written');
  assert.equal(proxied('example.com', 'https://LOCALHOST:6443'), false, 'localhost in any case is never proxied');
});

test('which proxy: by scheme, upper case first, bare host:port means http://, loopback never proxied', () => {
  const env = { HTTPS_PROXY: 'proxy.corp:3128', https_proxy: 'http://lower:1', HTTP_PROXY: 'http://plain:8080' };
  assert.deepEqual(proxyFromEnvironment(new URL('https://api.prod.example:6443'), env), {
    url: 'http://proxy.corp:3128/',
    proxy: 'http://proxy.corp:3128',
    source: 'HTTPS_PROXY',
  });
  assert.equal(proxyFromEnvironment(new URL('https://api.prod.example:6443'), { https_proxy: 'http://lower:1' }).source, 'https_proxy');
  assert.equal(proxyFromEnvironment(new URL('http://api.prod.example'), env).proxy, 'http://plain:8080');
  assert.equal(
    proxyFromEnvironment(new URL('https://api.prod.example'), { HTTP_PROXY: 'http://plain:8080' }).proxy,
    undefined,
    'https servers use HTTPS_PROXY only',
  );
  assert.equal(proxyFromEnvironment(new URL('https://127.0.0.1:6443'), env).proxy, undefined);
  assert.equal(proxyFromEnvironment(new URL('https://localhost:6443'), env).proxy, undefined);
  assert.equal(proxyFromEnvironment(new URL('https://[::1]:6443'), env).proxy, undefined);
  const excluded = proxyFromEnvironment(new URL('https://api.prod.example:6443'), { ...env, no_proxy: '.prod.example' });
  assert.deepEqual([excluded.proxy, excluded.source], [undefined, 'no_proxy excludes api.prod.example']);
  assert.equal(proxyFromEnvironment(new URL('https://api.prod.example'), { HTTPS_PROXY: 'socks5h://s:1080' }).proxy, 'socks5h://s:1080');
  assert.throws(
    () => proxyFromEnvironment(new URL('https://api.prod.example'), { HTTPS_PROXY: 'ftp://x:21' }),
    /HTTPS_PROXY=ftp:\/\/x:21 is not a supported proxy/,
  );
});

test('credentials in a proxy URL never reach a message', () => {
  assert.equal(redact('http://user:secret@proxy.corp:3128'), 'http://proxy.corp:3128');
  const chosen = proxyFromEnvironment(new URL('https://api.example'), { HTTPS_PROXY: 'http://user:secret@proxy.corp:3128' });
  assert.equal(chosen.proxy, 'http://proxy.corp:3128');
  assert.ok(chosen.url?.includes('secret'), 'the agent still gets them');
});

test('loadExtraCA: PEM certificates only, each one must parse', () => {
  const dir = scratchDir('extra-ca-');
  const good = path.join(dir, 'good.pem');
  writeFileSync(good, `# corp bundle\n${new SimPki().caPem}\n${new SimPki().caPem}`);
  assert.equal((loadExtraCA(good).pem.match(/BEGIN CERTIFICATE/g) ?? []).length, 2);
  const empty = path.join(dir, 'empty.pem');
  writeFileSync(empty, 'not a certificate\n');
  assert.throws(() => loadExtraCA(empty), /holds no PEM certificate/);
  const broken = path.join(dir, 'broken.pem');
  writeFileSync(broken, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
  assert.throws(() => loadExtraCA(broken), /does not parse/);
  assert.throws(() => loadExtraCA(path.join(dir, 'missing.pem')), /cannot read the extra CA bundle .*ENOENT/);
});

test('a kubeconfig proxy-url kubectl refuses is refused at load, naming the cluster and no password', () => {
  const dir = scratchDir('proxyout-proxy-url-');
  const load = (proxyUrl: string) => {
    const file = path.join(dir, 'config');
    writeFileSync(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        `clusters: [{name: prod-cluster, cluster: {server: "https://10.0.0.1:6443", proxy-url: "${proxyUrl}"}}]`,
        'users: [{name: u, user: {token: t}}]',
        'contexts: [{name: prod, context: {cluster: prod-cluster, user: u}}]',
        'current-context: prod',
        '',
      ].join('\n'),
    );
    return () => loadKubeConfig({ kubeconfig: file });
  };
  assert.throws(
    load('ftp://bob:s3cret@proxy.corp:2121'),
    /^StartupError: invalid 'proxy-url' "ftp:\/\/proxy\.corp:2121" for cluster "prod-cluster": unsupported scheme "ftp", must be http, https, or socks5$/,
  );
  assert.throws(load('socks4://proxy.corp:1080'), /unsupported scheme "socks4"/);
  for (const ok of ['http://proxy.corp:3128', 'https://proxy.corp:3128', 'socks5://proxy.corp:1080', 'socks5h://proxy.corp:1080']) load(ok)();
  rmSync(dir, { recursive: true, force: true });
});
