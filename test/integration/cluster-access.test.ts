// The kubeconfig decides how we reach the API server — client certificates, exec plugins,
// insecure-skip-tls-verify, proxy-url — and RBAC decides what we may watch. All of it must work.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import yaml from 'js-yaml';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { apiGet, startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { startConnectProxy, startSocks5Relay } from '../helpers/upstream-proxies.js';
import { startOidcIssuer } from '../helpers/oidc-issuer.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { flattenKubeConfig } from '../../src/state/kubeconfig.js';

let cluster: TestCluster;
before(async () => {
  cluster = await startTestCluster();
});
after(async () => {
  await cluster?.close();
});

async function withProxy(yaml: string, fn: (p: ProxyProcess) => Promise<void>, env?: NodeJS.ProcessEnv, where?: { file: string; cwd: string }): Promise<void> {
  const file = where?.file ?? path.join(cluster.dir, `kc-${Math.random().toString(16).slice(2)}`);
  await writeFile(file, yaml, { mode: 0o600 });
  // No drain on stop: the simulated runtime keeps a stream ~1 s after the client's FIN (as
  // containerd does), and how the proxy stops is not what these tests check.
  const p = await startProxyProcess(['--kubeconfig', file, '--listen-socks', '127.0.0.1:0', '--log-level', 'debug', '--shutdown-grace', '0'], {
    env,
    cwd: where?.cwd,
  });
  try {
    await fn(p);
  } finally {
    assert.equal(await p.stop(), 0);
  }
}

async function reachesWeb(p: ProxyProcess): Promise<void> {
  const r = await curl(['--proxy', `socks5h://${p.socks}`, 'http://web.shop.svc:8080/']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /hello from web-/);
}

const port = () => Number(new URL(cluster.sim.server).port);

/** Runs a program to completion; undefined when it is not installed. */
function runCommand(cmd: string, args: string[], cwd?: string): Promise<{ code: number | null; stdout: string; stderr: string } | undefined> {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: 30_000, cwd }, (err, stdout, stderr) => {
      if (err && (err as NodeJS.ErrnoException).code === 'ENOENT') return resolve(undefined);
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}
const withProxyUrl = (yaml: string, url: string) => yaml.replace(/^(\s+)server: (.*)$/m, `$1server: $2\n$1proxy-url: "${url}"`);

describe('authentication and transport as the kubeconfig says', () => {
  test('client certificate', async () => {
    await withProxy(cluster.sim.kubeconfigYaml({ auth: 'cert', namespace: 'shop' }), reachesWeb);
  });

  test('exec credential plugin', async () => {
    await withProxy(cluster.sim.kubeconfigYaml({ auth: 'exec', namespace: 'shop' }), reachesWeb);
  });

  test("a relative exec command (./cred.sh) runs from the kubeconfig's directory, as kubectl runs it, never from the working directory", async (t) => {
    // Dir A holds the kubeconfig and the real plugin; dir B, where we run, holds an impostor.
    const dirA = path.join(cluster.dir, 'exec-a');
    const dirB = path.join(cluster.dir, 'exec-b');
    await mkdir(dirA, { recursive: true });
    await mkdir(dirB, { recursive: true });
    const doc = yaml.load(cluster.sim.kubeconfigYaml({ auth: 'exec', namespace: 'shop' })) as {
      users: Array<{ user: { exec: { command: string; args?: string[] } } }>;
    };
    const exec = doc.users[0]!.user.exec;
    const quoted = [exec.command, ...(exec.args ?? [])].map((a) => `'${a}'`).join(' ');
    await writeFile(path.join(dirA, 'cred.sh'), `#!/bin/sh\nexec ${quoted}\n`);
    const marker = path.join(cluster.dir, 'impostor-ran');
    await writeFile(
      path.join(dirB, 'cred.sh'),
      `#!/bin/sh\necho ran >> '${marker}'\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"impostor"}}'\n`,
    );
    for (const dir of [dirA, dirB]) await chmod(path.join(dir, 'cred.sh'), 0o700);
    exec.command = './cred.sh';
    exec.args = [];
    const file = path.join(dirA, 'kubeconfig');
    await withProxy(yaml.dump(doc), reachesWeb, undefined, { file, cwd: dirB });
    assert.equal(existsSync(marker), false, "the working directory's cred.sh never ran");
    // A managed daemon's kubeconfig carries the resolved command, whatever directory it starts in.
    const { kc, namespace } = loadKubeConfig({ kubeconfig: path.relative(process.cwd(), file) });
    const flat = flattenKubeConfig(kc, namespace) as { users: Array<{ user: { exec: { command: string } } }> };
    assert.equal(flat.users[0]!.user.exec.command, path.join(dirA, 'cred.sh'));
    // kubectl with the same kubeconfig, run from B, runs A's plugin too.
    const kubectl = await runCommand('kubectl', ['--kubeconfig', file, 'get', 'pods', '-n', 'shop', '-o', 'name'], dirB);
    if (kubectl === undefined) return t.skip('kubectl not on PATH: the client-go comparison is skipped');
    assert.equal(kubectl.code, 0, kubectl.stderr);
    assert.match(kubectl.stdout, /^pod\/web-/m);
    assert.equal(existsSync(marker), false, "kubectl did not run the working directory's cred.sh either");
  });

  test('exec plugins get KUBERNETES_EXEC_INFO as client-go sends it (provideClusterInfo → spec.cluster)', async (t) => {
    // The plugin fails without the exact ExecCredential; real kubectl passing the same kubeconfig
    // shows the plugin asks for what client-go sends, not for what we happen to send.
    const yaml = cluster.sim
      .kubeconfigYaml({ auth: 'exec', namespace: 'shop' })
      .replace('      provideClusterInfo: false', '      provideClusterInfo: true')
      .replace(
        '      env:',
        `      env:\n      - name: "SIM_EXEC_REQUIRE_INFO"\n        value: "1"\n      - name: "SIM_EXEC_EXPECT_SERVER"\n        value: "${cluster.sim.server}"`,
      );
    assert.match(yaml, /provideClusterInfo: true/);
    await withProxy(yaml, reachesWeb);
    const file = path.join(cluster.dir, 'kc-exec-info');
    await writeFile(file, yaml, { mode: 0o600 });
    const kubectl = await runCommand('kubectl', ['--kubeconfig', file, 'get', 'pods', '-n', 'shop', '-o', 'name']);
    if (kubectl === undefined) return t.skip('kubectl not on PATH: the client-go comparison is skipped');
    assert.equal(kubectl.code, 0, kubectl.stderr);
    assert.match(kubectl.stdout, /^pod\/web-/m);
  });

  test('auth-provider oidc: a valid ID token is used as is; an expired one is refreshed at the issuer first', async () => {
    const issuer = await startOidcIssuer({ refreshToken: 'rt-1', onIdToken: (token) => cluster.sim.issueToken({ token }) });
    const oidcYaml = (idToken: string, caLine: string) =>
      cluster.sim
        .kubeconfigYaml({ token: 'PLACEHOLDER', namespace: 'shop' })
        .replace(
          /^(\s+)token: "PLACEHOLDER"$/m,
          [
            '$1auth-provider:',
            '$1  name: oidc',
            '$1  config:',
            `$1    client-id: "${issuer.clientId}"`,
            `$1    id-token: "${idToken}"`,
            '$1    refresh-token: "rt-1"',
            `$1    idp-issuer-url: "${issuer.url}"`,
            ...(caLine ? [`$1    ${caLine}`] : []),
          ].join('\n'),
        );
    const caData = `idp-certificate-authority-data: "${Buffer.from(issuer.caPem).toString('base64')}"`;
    try {
      const valid = issuer.idToken('alice@example.com', 3600);
      cluster.sim.issueToken({ token: valid });
      await withProxy(oidcYaml(valid, caData), reachesWeb);
      assert.equal(issuer.refreshes, 0, 'a valid ID token needs no refresh');
      // Expired and unknown to the API server: only a refreshed token gets in. The issuer's CA
      // comes from the kubeconfig, as client-go reads it…
      await withProxy(oidcYaml(issuer.idToken('alice@example.com', -60), caData), reachesWeb);
      assert.equal(issuer.refreshes, 1, 'the expired ID token was refreshed once');
      // …or from the trust store (NODE_EXTRA_CA_CERTS stands in for a CA the system trusts).
      const caFile = path.join(cluster.dir, 'oidc-ca.pem');
      await writeFile(caFile, issuer.caPem);
      await withProxy(oidcYaml(issuer.idToken('alice@example.com', -60), ''), reachesWeb, { NODE_EXTRA_CA_CERTS: caFile });
      assert.equal(issuer.refreshes, 2);
    } finally {
      await issuer.close();
    }
  });

  test("tokenFile (the field kubectl reads): trimmed, relative to the kubeconfig; client-node's token-file read the same way", async () => {
    const tokenPath = path.join(cluster.dir, 'admin-token');
    await writeFile(tokenPath, `${cluster.sim.adminToken}\n`, { mode: 0o600 });
    // client-node itself reads token-file at load time, from the working directory: absolute there.
    for (const [field, value] of [
      ['tokenFile', 'admin-token'],
      ['token-file', tokenPath],
    ]) {
      const yaml = cluster.sim.kubeconfigYaml({ token: 'PLACEHOLDER', namespace: 'shop' }).replace('token: "PLACEHOLDER"', `${field}: "${value}"`);
      await withProxy(yaml, reachesWeb);
    }
  });

  test('impersonation: as-groups and as-uid are sent as client-go sends them (client-node sends only as)', async (t) => {
    const impersonating = (extra: string) =>
      cluster.sim.kubeconfigYaml({ namespace: 'shop' }).replace(/^(\s+)token: (.*)$/m, `$1token: $2\n$1as: "bob"${extra.replace(/\n/g, '\n$1')}`);
    const yaml = impersonating('\nas-groups:\n- "system:masters"\n- "devs"\nas-uid: "u-123"');
    const before = cluster.sim.impersonations.length;
    await withProxy(yaml, reachesWeb);
    const ours = cluster.sim.impersonations.slice(before);
    assert.ok(ours.length > 0, 'the API server saw impersonated requests');
    for (const i of ours) assert.deepEqual(i, { user: 'bob', groups: ['system:masters', 'devs', 'system:authenticated'], uid: 'u-123' });
    // Without its groups bob may do nothing here: the proxy must refuse to start, not half-work.
    const file = path.join(cluster.dir, 'kc-as-only');
    await writeFile(file, impersonating(''), { mode: 0o600 });
    const bare = await runCli(['--kubeconfig', file, '--listen-socks', '127.0.0.1:0']);
    assert.notEqual(bare.code, 0);
    assert.match(bare.stderr, /forbidden|not allowed|403/i);
    // kubectl with the same kubeconfig sends the same headers (one Impersonate-Group line per group).
    const kubectlFile = path.join(cluster.dir, 'kc-impersonate');
    await writeFile(kubectlFile, yaml, { mode: 0o600 });
    const mark = cluster.sim.impersonations.length;
    const kubectl = await runCommand('kubectl', ['--kubeconfig', kubectlFile, 'get', 'pods', '-n', 'shop', '-o', 'name']);
    if (kubectl === undefined) return t.skip('kubectl not on PATH: the client-go comparison is skipped');
    assert.equal(kubectl.code, 0, kubectl.stderr);
    const theirs = cluster.sim.impersonations.slice(mark);
    assert.ok(theirs.length > 0);
    for (const i of theirs) assert.deepEqual(i, ours[0]);
  });

  test('insecure-skip-tls-verify (no CA in the kubeconfig)', async () => {
    const yaml = cluster.sim.kubeconfigYaml({ insecureSkipTlsVerify: true });
    assert.doesNotMatch(yaml, /certificate-authority/);
    await withProxy(yaml, reachesWeb);
  });

  test('tls-server-name is what the server certificate is checked against', async () => {
    const withName = (name: string) => cluster.sim.kubeconfigYaml().replace(/^(\s+)server: (.*)$/m, `$1server: $2\n$1tls-server-name: "${name}"`);
    // The serving certificate names localhost: with that name it verifies…
    await withProxy(withName('localhost'), reachesWeb);
    // …and with another name it must not, which proves the setting is honoured at all.
    const file = path.join(cluster.dir, 'wrong-sni');
    await writeFile(file, withName('not-the-api.example'), { mode: 0o600 });
    const r = await runCli(['--kubeconfig', file, '--listen-socks', '127.0.0.1:0']);
    assert.notEqual(r.code, 0);
    assert.match(
      r.stderr,
      /is not trusted: its certificate does not name this address .*not-the-api\.example.*: give the kubeconfig a server address \(or tls-server-name\)/,
    );
  });

  test('proxy-url socks5:// carries the watches and every port-forward', async () => {
    const relay = await startSocks5Relay(port());
    try {
      await withProxy(withProxyUrl(cluster.sim.kubeconfigYaml(), relay.url), async (p) => {
        const before = relay.connections;
        await reachesWeb(p);
        assert.ok(relay.connections > before, 'the port-forward went through the SOCKS proxy');
      });
    } finally {
      await relay.close();
    }
  });

  test('proxy-url http:// (CONNECT) carries them too', async () => {
    const connect = await startConnectProxy(port());
    try {
      await withProxy(withProxyUrl(cluster.sim.kubeconfigYaml(), connect.url), async (p) => {
        const before = connect.connections;
        await reachesWeb(p);
        assert.ok(connect.connections > before, 'the port-forward went through the HTTP proxy');
      });
    } finally {
      await connect.close();
    }
  });
});

describe('RBAC: namespace-scoped credentials', () => {
  test('watches the context namespace, then namespaces a request names; forbidden ones → 0x02', async () => {
    const token = cluster.sim.issueToken({ namespaces: ['shop', 'data'] });
    await withProxy(cluster.sim.kubeconfigYaml({ token, namespace: 'shop' }), async (p) => {
      // Logs come on stderr, the ready line on stdout: two pipes, read in either order.
      await eventually(async () => p.logs.some((l) => String(l.msg).includes('not allowed to watch cluster-wide')));
      await reachesWeb(p);
      const echo = await socks5Connect(p.socks!, 'echo.data.svc', 7000);
      assert.equal(echo.reply, 0, 'a namespace named by the request is watched on demand');
      echo.socket.destroy();
      const hello = await socks5Connect(p.socks!, 'hello.default.svc', 80);
      assert.equal(hello.reply, 0x02, 'a namespace RBAC forbids → not allowed');
      hello.socket.destroy();
      await reachesWeb(p);
    });
  });
});

describe('RBAC: exactly the rights the README lists', () => {
  test('list/watch on Services and EndpointSlices, list/get on Pods (no pod watch, no namespaces, no Ingresses): Service names and Pod IPs work', async () => {
    const denied = ['watch pods', 'list namespaces', 'watch namespaces', 'get namespaces', 'list ingresses', 'watch ingresses'];
    const token = cluster.sim.issueToken({ denied });
    const pods = (await apiGet(cluster.sim, '/api/v1/namespaces/shop/pods')) as { items: Array<{ metadata: { name: string }; status: { podIP?: string } }> };
    const web = pods.items.find((p) => p.metadata.name.startsWith('web-') && p.status.podIP);
    assert.ok(web, 'a web pod with an IP');
    await withProxy(cluster.sim.kubeconfigYaml({ token, namespace: 'shop' }), async (p) => {
      await reachesWeb(p);
      const byIp = await curl(['--proxy', `socks5h://${p.socks}`, `http://${web.status.podIP}:8081/`]);
      assert.equal(byIp.code, 0, byIp.stderr);
      assert.match(byIp.stdout, new RegExp(`hello from ${web.metadata.name}`));
    });
  });
});

describe('watch recovery', () => {
  test('watches resumed from a compacted resourceVersion relist (410 Gone) and see new Services', async () => {
    const yaml = cluster.sim.kubeconfigYaml({ namespace: 'shop' });
    await withProxy(yaml, async (p) => {
      await reachesWeb(p);
      // While the API server is down, objects change and history is compacted: the informers
      // come back with a resourceVersion the server no longer has. It comes back once that is done.
      let bringUp!: () => void;
      const down = cluster.sim.restartApiServer(new Promise<void>((r) => (bringUp = r)));
      try {
        await new Promise((r) => setTimeout(r, 200));
        await cluster.sim.createPod({ namespace: 'shop', name: 'after-410', labels: { app: 'after-410' }, ports: [{ name: 'http', containerPort: 8080 }] });
        await cluster.sim.createService({ namespace: 'shop', name: 'after-410', selector: { app: 'after-410' }, ports: [{ port: 80, targetPort: 8080 }] });
        cluster.sim.compact();
        cluster.sim.resetCounters();
      } finally {
        bringUp();
      }
      await down;
      const body = await eventually(async () => {
        const r = await curl(['--proxy', `socks5h://${p.socks}`, 'http://after-410.shop.svc/']);
        return r.code === 0 && r.stdout;
      });
      assert.match(body, /hello from after-410/);
      // Without the 410 the informers would only re-watch; a list (or a watch-list: a watch that
      // asks for the initial events) proves they relisted.
      const c = cluster.sim.counters;
      assert.ok(c.list + c.watchList >= 1, `relisted after 410: ${JSON.stringify(c.byPath)}`);
    });
  });
});
