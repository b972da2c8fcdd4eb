// Credentials that expire or rotate while the proxy runs, against the real kube-apiserver: JWT
// authentication through its structured authentication config (a local issuer, 12 s ID tokens,
// 6 s ones for the exec plugin, which the server refuses once past `exp`), a kubeconfig exec
// plugin handing them out (then a lapsed login: dead tokens), `auth-provider: oidc` refreshing
// them, a client certificate valid for seconds (then renewed in place), and a bound
// ServiceAccount token in a `tokenFile` rotated as kubelet's atomic writer rotates it (`..data`
// swapped), then revoked. One cluster; the four checks run at once (each waits on tokens that
// expire). Skips when the binaries are not built.
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { X509Certificate } from 'node:crypto';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { endpointSlicesCaughtUp, startClusterLogged } from '../helpers/real-cluster-setup.js';
import { manifests, pod, service } from '../helpers/real-cluster-objects.js';
import { startOidcIssuer, type OidcIssuer } from '../helpers/oidc-issuer.js';
import { jwtAuthenticationConfig, jwtUserBinding } from '../helpers/real-cluster-jwt.js';
import { startProxyProcess, runCli, type ProxyProcess } from '../helpers/proxy-process.js';
import { connectManaged } from '../helpers/managed-proxies.js';
import { statusItems } from '../helpers/status-json.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { curl } from '../helpers/curl.js';

const skip = skipUnlessRealCluster();
const TTL_S = 12;
/**
 * The exec plugin's tokens live shorter: the proxy keeps an ExecCredential exactly until its
 * expirationTimestamp (no early refresh, as client-go's exec.go), so each expiry the test waits
 * out costs this much. OIDC keeps TTL_S: it refreshes 10 s before `exp` (oidc.ts).
 */
const EXEC_TTL_S = 6;
/**
 * The short client certificates: long enough for two proxies to start with them on a loaded
 * 2-core machine (10 s was not), since a proxy refuses to start with an expired one.
 */
const CERT_S = 30;
const ECHOS = ['echo1', 'echo2', 'echo3'];

let cluster: RealCluster | undefined;
let issuer: OidcIssuer | undefined;
let dir = '';
const proxies: ProxyProcess[] = [];

before(async () => {
  if (skip) return;
  dir = await mkdtemp(path.join(tmpdir(), 'proxyout-creds-'));
  issuer = await startOidcIssuer({ refreshToken: 'rt-1', ttlSeconds: TTL_S });
  await writeFile(path.join(dir, 'issuer-ca.pem'), issuer.caPem);
  cluster = await startClusterLogged({ authenticationConfig: jwtAuthenticationConfig(issuer) }, ' with a JWT issuer');
  const echo = (name: string) => pod({ name, containers: [{ name: 'echo', image: 'proxyout/echo', ports: [{ containerPort: 7000 }] }] });
  const objects = [pod({ name: 'web', containers: [{ name: 'web', image: 'proxyout/http', ports: [{ containerPort: 8080 }] }] })];
  objects.push(service('web', { ports: [{ port: 80, targetPort: 8080 }] }));
  for (const e of ECHOS) objects.push(echo(e), service(e, { ports: [{ port: 7000 }] }));
  await cluster.kubectl(['apply', '-f', '-'], { input: manifests(...objects) + '---\n' + jwtUserBinding('alice@example.com') });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod', '--all', '--timeout=60s']);
  await endpointSlicesCaughtUp(cluster);
});

after(async () => {
  for (const p of proxies) await p.stop();
  await cluster?.stop();
  await issuer?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A kubeconfig for the bed's server with one user entry (YAML lines under `user:`). */
async function kubeconfig(name: string, userLines: string): Promise<string> {
  const file = path.join(dir, `${name}.kubeconfig`);
  const ca = path.join(cluster!.dir, 'pki', 'ca.crt');
  await writeFile(
    file,
    `apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: ${cluster!.server}\n    certificate-authority: ${ca}\n` +
      `contexts:\n- name: ${name}\n  context: {cluster: real, user: ${name}, namespace: shop}\ncurrent-context: ${name}\n` +
      `users:\n- name: ${name}\n  user:\n${userLines}`,
    { mode: 0o600 },
  );
  return file;
}

const proxy = async (file: string) => {
  const p = await startProxyProcess(['--kubeconfig', file, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0']);
  proxies.push(p);
  return p;
};

/** One round trip on an open echo stream. */
async function echoes(socket: import('node:net').Socket, text: string): Promise<string> {
  const back = new Promise<string>((resolve, reject) => {
    socket.once('data', (d: Buffer) => resolve(d.toString()));
    socket.once('error', reject);
    socket.once('end', () => reject(new Error('the stream ended')));
    setTimeout(() => reject(new Error('no echo within 10 s')), 10_000).unref();
  });
  socket.resume(); // socks5Connect leaves it paused
  socket.write(text);
  return back;
}

/** When a certificate file's validity ends (ms since the epoch). */
const notAfter = async (cert: string) => Date.parse(new X509Certificate(await readFile(cert)).validTo);

const web = async (http: string) => (await curl(['-x', `http://${http}`, 'http://web.shop/'])).stdout.trim();

async function until<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs: number): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await delay(250);
  }
}

describe('credentials that expire or rotate', { concurrency: true }, () => {
  test(
    'exec plugin with 6 s JWTs: streams and new tunnels go on across expiries; a lapsed login is degraded, never ready; login again serves',
    { timeout: 120_000 },
    async (t: TestContext) => {
      if (skip) return t.skip(skip);
      const ttl = path.join(dir, 'exec.ttl');
      const runs = path.join(dir, 'exec.runs');
      await writeFile(ttl, String(EXEC_TTL_S));
      const plugin = path.join(dir, 'cred.sh');
      const url = `${issuer!.url}/exec-credential?ttl=`;
      await writeFile(plugin, `#!/bin/sh\necho run >> '${runs}'\nexec curl -sf --cacert '${dir}/issuer-ca.pem' "${url}$(cat '${ttl}')"\n`, { mode: 0o700 });
      const file = await kubeconfig(
        'exec',
        `    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ${plugin}\n      interactiveMode: Never\n`,
      );
      const stateDir = await mkdtemp(path.join(dir, 'state-'));
      const cli = (args: string[]) => runCli(args, { env: { KUBECTL_PROXYOUT_STATE_DIR: stateDir }, timeoutMs: 30_000 });
      const { socks, http } = await connectManaged(stateDir, file);
      t.after(() => cli(['disconnect', '--all']));
      type Route = { state: string; reason?: string };
      const route = async () => statusItems<{ routes: Route[] }>((await cli(['status', '--json'])).stdout)[0]!.routes[0]!;

      const { reply, socket } = await socks5Connect(socks, 'echo1.shop', 7000);
      assert.equal(reply, 0);
      t.after(() => socket.destroy());
      assert.equal(await echoes(socket, 'before'), 'before');
      // Two expiries, each followed by a new tunnel (fresh options: the plugin runs again); the
      // stream opened with the first token goes on.
      const runCount = async () => (await readFile(runs, 'utf8')).split('\n').filter(Boolean).length;
      const before = await runCount();
      await delay(EXEC_TTL_S * 1000 + 1000);
      const fresh = await socks5Connect(socks, 'echo2.shop', 7000);
      assert.equal(fresh.reply, 0, 'a new tunnel after the first expiry');
      fresh.socket.destroy();
      await delay(EXEC_TTL_S * 1000 + 1000);
      assert.equal(await web(http), 'pod=web namespace=shop port=8080', 'a new tunnel after the second');
      assert.ok((await runCount()) >= before + 2, `the plugin ran ${(await runCount()) - before} times in two lifetimes`);
      assert.equal(await echoes(socket, 'after'), 'after');

      // The login lapses: each run hands out a token already past its exp.
      await writeFile(ttl, '-5');
      const seen = await until('the route degraded', async () => ((await route()).state === 'degraded' ? route() : undefined), EXEC_TTL_S * 1000 + 20_000);
      assert.match(seen.reason ?? '', /refuses the credentials of context "exec" \(user "exec", 401 Unauthorized\)/);
      for (let i = 0; i < 8; i++) {
        const r = await route();
        assert.equal(r.state, 'degraded', `still dead, yet ${JSON.stringify(r)} (check ${i})`);
        await delay(1000);
      }
      const refused = await socks5Connect(socks, 'echo3.shop', 7000);
      assert.equal(refused.reply, 1, 'a new tunnel is refused (401)');
      refused.socket.destroy();

      // Logged in again: the next request is taken and the route is ready.
      await writeFile(ttl, String(EXEC_TTL_S));
      await until('served again', async () => (await web(http)).startsWith('pod=web'), 10_000);
      assert.equal((await route()).state, 'ready');
    },
  );

  test('auth-provider oidc: expired ID tokens are refreshed at the issuer, written back, and new tunnels open', { timeout: 90_000 }, async (t: TestContext) => {
    if (skip) return t.skip(skip);
    const ca = path.join(dir, 'issuer-ca.pem');
    const config = { 'client-id': issuer!.clientId, 'idp-issuer-url': issuer!.url, 'idp-certificate-authority': ca, 'refresh-token': 'rt-1' };
    const expired = issuer!.idToken('alice@example.com', -60);
    const cfg = Object.entries({ ...config, 'id-token': expired })
      .map(([k, v]) => `        ${k}: ${v}\n`)
      .join('');
    const file = await kubeconfig('oidc', `    auth-provider:\n      name: oidc\n      config:\n${cfg}`);
    const p = await proxy(file);
    assert.equal(await web(p.http!), 'pod=web namespace=shop port=8080');
    const before = issuer!.refreshes;
    await delay(TTL_S * 1000 + 2000);
    const { reply, socket } = await socks5Connect(p.socks!, 'echo1.shop', 7000);
    assert.equal(reply, 0, 'a new tunnel once the first ID token expired');
    assert.equal(await echoes(socket, 'x'), 'x');
    socket.destroy();
    assert.ok(issuer!.refreshes > before, 'refreshed again after the expiry');
    const written = /id-token: (\S+)/.exec(await readFile(file, 'utf8'))?.[1] ?? '';
    assert.ok(JSON.parse(Buffer.from(written.split('.')[1]!, 'base64url').toString()).exp > Date.now() / 1000, 'a live ID token written back');
  });

  test(
    'a client certificate that expires: named in doctor; renewed in place or rewritten into the kubeconfig, taken without a restart',
    { timeout: 90_000 },
    async (t: TestContext) => {
      if (skip) return t.skip(skip);
      // Both certificates are issued before their proxies start and must outlive their start-up:
      // on a loaded machine that took over 10 s. The test then waits for the later expiry itself.
      const { cert, key } = await cluster!.issueClientCert('shortie', CERT_S);
      const file = await kubeconfig('short', `    client-certificate: ${cert}\n    client-key: ${key}\n`);
      // The same embedded in the kubeconfig (client-certificate-data), as login tools write it.
      const embedded = async (seconds: number) => {
        const pair = await cluster!.issueClientCert('embedded', seconds);
        const data = async (f: string) => (await readFile(f)).toString('base64');
        const f = await kubeconfig('embedded', `    client-certificate-data: ${await data(pair.cert)}\n    client-key-data: ${await data(pair.key)}\n`);
        return { file: f, cert: pair.cert };
      };
      const short = await embedded(CERT_S);
      const expiries = [await notAfter(cert), await notAfter(short.cert)];
      const [p, inline] = await Promise.all([proxy(file), proxy(short.file)]);
      assert.equal(await web(p.http!), 'pod=web namespace=shop port=8080');
      assert.equal(await web(inline.http!), 'pod=web namespace=shop port=8080');
      assert.ok(Date.now() < Math.min(...expiries), `both served before their certificates expired (raise CERT_S if start-up took ${CERT_S} s)`);
      await delay(Math.max(...expiries) - Date.now() + 1000);
      const refused = await socks5Connect(p.socks!, 'echo1.shop', 7000);
      assert.equal(refused.reply, 1, 'a new tunnel with the expired certificate: 401');
      refused.socket.destroy();
      const doctor = await runCli(['doctor', '--kubeconfig', file], { timeoutMs: 30_000 });
      assert.match(doctor.stdout + doctor.stderr, /the client certificate expired at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: get a new one/);
      await cluster!.issueClientCert('shortie', 3600);
      const again = await until(
        'the renewed certificate taken',
        async () => {
          const c = await socks5Connect(p.socks!, 'echo1.shop', 7000);
          if (c.reply === 0) return c;
          c.socket.destroy();
          return undefined;
        },
        5_000,
      );
      assert.equal(await echoes(again.socket, 'renewed'), 'renewed');
      again.socket.destroy();

      const stale = await socks5Connect(inline.socks!, 'echo1.shop', 7000);
      assert.equal(stale.reply, 1, 'the embedded certificate expired too');
      stale.socket.destroy();
      // A new one written into the kubeconfig: kubectl uses it at its next run, the proxy within seconds.
      await embedded(3600);
      const renewed = await until(
        "the kubeconfig's new embedded certificate taken",
        async () => {
          const c = await socks5Connect(inline.socks!, 'echo2.shop', 7000);
          if (c.reply === 0) return c;
          c.socket.destroy();
          return undefined;
        },
        10_000,
      );
      renewed.socket.destroy();
    },
  );

  test(
    'a bound ServiceAccount token file rotated by a ..data swap, the old one revoked; then the ServiceAccount deleted',
    { timeout: 90_000 },
    async (t: TestContext) => {
      if (skip) return t.skip(skip);
      const k = cluster!.kubectl;
      await k(['-n', 'shop', 'create', 'serviceaccount', 'robot']);
      await k(['create', 'clusterrolebinding', 'robot', '--clusterrole=cluster-admin', '--serviceaccount=shop:robot']);
      for (const s of ['s1', 's2']) await k(['-n', 'shop', 'create', 'secret', 'generic', s]);
      const token = async (secret: string) =>
        (await k(['-n', 'shop', 'create', 'token', 'robot', '--duration=10m', '--bound-object-kind=Secret', `--bound-object-name=${secret}`])).stdout.trim();
      // kubelet's atomic writer: token -> ..data/token, ..data -> ..<timestamp>, swapped by rename.
      const sa = path.join(dir, 'sa');
      await mkdir(path.join(sa, '..v1'), { recursive: true });
      await writeFile(path.join(sa, '..v1', 'token'), await token('s1'));
      await symlink('..v1', path.join(sa, '..data'));
      await symlink('..data/token', path.join(sa, 'token'));
      const file = await kubeconfig('sa', `    tokenFile: ${path.join(sa, 'token')}\n`);
      const p = await proxy(file);
      const open = await socks5Connect(p.socks!, 'echo1.shop', 7000);
      assert.equal(open.reply, 0);
      t.after(() => open.socket.destroy());

      await mkdir(path.join(sa, '..v2'));
      await writeFile(path.join(sa, '..v2', 'token'), await token('s2'));
      await symlink('..v2', path.join(sa, '..data_tmp'));
      await rename(path.join(sa, '..data_tmp'), path.join(sa, '..data'));
      await rm(path.join(sa, '..v1'), { recursive: true });
      await k(['-n', 'shop', 'delete', 'secret', 's1']);
      // The API server keeps a token it took for 10 s (its authentication cache).
      await delay(11_000);
      const next = await socks5Connect(p.socks!, 'echo2.shop', 7000);
      assert.equal(next.reply, 0, 'a new tunnel after the rotation: the file is read again on the 401');
      assert.equal(await echoes(next.socket, 'rotated'), 'rotated');
      next.socket.destroy();
      assert.equal(await echoes(open.socket, 'kept'), 'kept', 'the stream opened with the revoked token goes on, as under kubectl port-forward');

      await k(['-n', 'shop', 'delete', 'serviceaccount', 'robot']);
      await delay(11_000);
      // A new tunnel (echo3 has none yet: a warm one would take new streams without asking again).
      const gone = await socks5Connect(p.socks!, 'echo3.shop', 7000);
      gone.socket.destroy();
      assert.equal(gone.reply, 1, 'refused once the ServiceAccount is gone');
      assert.equal(await echoes(open.socket, 'still'), 'still', 'the stream opened before goes on');
    },
  );
});
