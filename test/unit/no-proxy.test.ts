// NO_PROXY for the variables we hand out (proxy/client-env.ts): read back as client-go reads it
// (cluster/egress-proxy.ts follows golang.org/x/net/http/httpproxy), the routes' API servers go
// direct while cluster names still go to the proxy.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { exportedVariables, noProxyValue } from '../../src/proxy/client-env.js';
import { apiServersOf } from '../../src/routes/route.js';
import { proxyFromEnvironment } from '../../src/cluster/egress-proxy.js';

test('loopback names, then each API server host (no port, lower case), then the caller’s entries, each once; IPv6 bare and bracketed', () => {
  const servers = ['https://API.prod.example:6443', 'https://10.0.0.1', 'https://[fd00::1]:6443', 'https://api.prod.example:443', 'not a url'];
  // curl and Go match an IPv6 host by `::1`, Python's urllib by `[::1]`: both spellings.
  assert.equal(noProxyValue(servers, {}), 'localhost,127.0.0.1,::1,[::1],api.prod.example,10.0.0.1,fd00::1,[fd00::1]');
  assert.equal(
    noProxyValue([], { NO_PROXY: '.corp.example, 10.0.0.0/8,,localhost', no_proxy: 'git.corp.example' }),
    'localhost,127.0.0.1,::1,[::1],.corp.example,10.0.0.0/8,git.corp.example',
  );
});

test('an inherited NO_PROXY=* is dropped: in a list, Go would still send nothing through the proxy', () => {
  const value = noProxyValue([], { NO_PROXY: '*', no_proxy: '*, .corp.example' });
  assert.equal(value, 'localhost,127.0.0.1,::1,[::1],.corp.example');
  const env = { ...exportedVariables({ http: { address: '127.0.0.1', family: 'IPv4', port: 3128 } }), NO_PROXY: value, no_proxy: value };
  assert.equal(proxyFromEnvironment(new URL('http://web.shop:8080'), env).url, 'http://127.0.0.1:3128/');
  // What the kept `*` did: client-go (as Go's httpproxy) bypasses the proxy for every host.
  assert.equal(proxyFromEnvironment(new URL('http://web.shop:8080'), { ...env, NO_PROXY: `${value},*`, no_proxy: `${value},*` }).proxy, undefined);
});

test('inherited entries for cluster-only names (.svc, .cluster.local, names under them) are dropped: they would send cluster names past the proxy', () => {
  const inherited = '.corp.example,.svc,svc,*.cluster.local,.cluster.local.,kubernetes.default.svc,10.96.0.0/12,mysvc';
  const value = noProxyValue(['https://kubernetes.default.svc'], { NO_PROXY: inherited });
  // The route's own API server stays (kubectl reaches it directly); the user's other entries too.
  assert.equal(value, 'localhost,127.0.0.1,::1,[::1],kubernetes.default.svc,.corp.example,10.96.0.0/12,mysvc');
  const env = { ...exportedVariables({ http: { address: '127.0.0.1', family: 'IPv4', port: 3128 } }), NO_PROXY: value, no_proxy: value };
  for (const url of ['http://web.shop.svc:8080', 'http://web.shop.svc.cluster.local:8080']) {
    assert.equal(proxyFromEnvironment(new URL(url), env).url, 'http://127.0.0.1:3128/', url);
  }
});

test('with a custom cluster domain, inherited entries for it are dropped too; its parents and neighbours stay', () => {
  const inherited = '.k8s.corp.example,*.svc.k8s.corp.example,.corp.example,git.corp.example,.cluster.local';
  assert.equal(noProxyValue([], { NO_PROXY: inherited }, 'K8s.Corp.Example.'), 'localhost,127.0.0.1,::1,[::1],.corp.example,git.corp.example');
  const saved = { NO_PROXY: process.env.NO_PROXY, no_proxy: process.env.no_proxy };
  try {
    process.env.NO_PROXY = '.k8s.corp.example';
    delete process.env.no_proxy;
    const env = exportedVariables({ http: { address: '127.0.0.1', family: 'IPv4', port: 3128 }, clusterDomain: 'k8s.corp.example' });
    assert.equal(proxyFromEnvironment(new URL('http://web.shop.svc.k8s.corp.example:8080'), env).url, 'http://127.0.0.1:3128/');
  } finally {
    for (const [k, v] of Object.entries(saved))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
  }
});

test('the exported variables send kubectl to its API servers directly and cluster names to the proxy', () => {
  const vars = exportedVariables({
    http: { address: '127.0.0.1', family: 'IPv4', port: 3128 },
    apiServers: ['https://api.prod.example:6443', 'https://10.1.2.3:6443', 'https://[fd00::1]:6443'],
  });
  const env = { ...vars };
  for (const server of ['https://api.prod.example:6443', 'https://10.1.2.3:6443', 'https://[fd00::1]:6443']) {
    assert.equal(proxyFromEnvironment(new URL(server), env).proxy, undefined, server);
  }
  assert.equal(proxyFromEnvironment(new URL('https://web.shop.svc.cluster.local:8443'), env).url, 'http://127.0.0.1:3128/');
  assert.equal(vars.no_proxy, vars.NO_PROXY);
});

test('no proxy variable, no NO_PROXY; API servers come from cluster routes only', () => {
  assert.deepEqual(exportedVariables({ apiServers: ['https://a:6443'] }), {});
  const routes = [
    { name: 'prod', kind: 'cluster', state: 'ready' as const, details: { server: 'https://a:6443' } },
    { name: 'k', kind: 'konnectivity', state: 'ready' as const, details: { server: 'konnectivity.example:8090' } },
    { name: 'jump', kind: 'ssh', state: 'ready' as const },
  ];
  assert.deepEqual(apiServersOf(routes), ['https://a:6443']);
});
