// Credentials that expire while the proxy runs: the kubeconfig's exec plugin starts failing (an SSO
// session expired: `aws sso login` needed) and the API server refuses the token it gave. `status`
// and `doctor` show it on the route with the plugin's own first line of stderr; requests fail at
// once with it; the plugin runs once per backoff step however many requests arrive; once the user
// has logged in again, the route serves by itself. A managed proxy, real curl, a shell plugin.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import yaml from 'js-yaml';
import { SimCluster } from '../sim/cluster.js';
import { seedSampleCluster } from '../sim/sample.js';
import { runCli } from '../helpers/proxy-process.js';
import { eventually } from '../helpers/cluster.js';
import { curl } from '../helpers/curl.js';
import { statusItems } from '../helpers/status-json.js';
import { connectManaged } from '../helpers/managed-proxies.js';

let sim: SimCluster;
let dir: string;
let stateDir: string;
let id = '';
let socks = '';
let httpProxy = '';
const files = { token: '', runs: '', loggedOut: '' };

const cli = (args: string[], timeoutMs = 60_000) => runCli(args, { env: { KUBECTL_PROXYOUT_STATE_DIR: stateDir }, timeoutMs });
const runs = async () => (await readFile(files.runs, 'utf8')).split('\n').filter(Boolean).length;
type JsonRoute = { name: string; state: string; reason?: string; since?: string };
const route = async (): Promise<JsonRoute> => statusItems<{ routes: JsonRoute[] }>((await cli(['status', '--json'])).stdout)[0]!.routes[0]!;

before(async () => {
  sim = await SimCluster.start({ quiet: true });
  await seedSampleCluster(sim);
  dir = await mkdtemp(path.join(tmpdir(), 'proxyout-sso-'));
  stateDir = await mkdtemp(path.join(tmpdir(), 'proxyout-state-'));
  Object.assign(files, { token: path.join(dir, 'token'), runs: path.join(dir, 'runs'), loggedOut: path.join(dir, 'logged-out') });
  await writeFile(files.token, sim.issueToken());
  await writeFile(files.runs, '');
  // As the AWS CLI says it when its SSO session has expired: two lines on stderr, exit 1.
  const plugin = path.join(dir, 'sso-plugin.sh');
  await writeFile(
    plugin,
    `#!/bin/sh
echo run >> '${files.runs}'
if [ -e '${files.loggedOut}' ]; then
  echo "Error loading SSO Token: Token for my-sso does not exist" >&2
  echo "To refresh this SSO session run 'aws sso login' with the corresponding profile." >&2
  exit 1
fi
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"2099-01-01T00:00:00Z"}}\\n' "$(cat '${files.token}')"
`,
  );
  await chmod(plugin, 0o700);
  const doc = yaml.load(sim.kubeconfigYaml({ auth: 'exec', namespace: 'shop' })) as { users: Array<{ user: { exec: Record<string, unknown> } }> };
  Object.assign(doc.users[0]!.user.exec, { command: plugin, args: [], env: null });
  const kubeconfig = path.join(dir, 'kubeconfig');
  await writeFile(kubeconfig, yaml.dump(doc), { mode: 0o600 });
  ({ id, socks, http: httpProxy } = await connectManaged(stateDir, kubeconfig));
});

after(async () => {
  await cli(['quit']);
  await sim?.stop();
  await rm(dir, { recursive: true, force: true });
  await rm(stateDir, { recursive: true, force: true });
});

test("an SSO session that expires: shown on the route with the plugin's words, requests fail at once, the plugin is not hammered, login again recovers", async () => {
  assert.match((await curl(['-sS', '-x', `socks5h://${socks}`, 'http://hello.default/'])).stdout, /hello from/);
  const token = (await readFile(files.token, 'utf8')).trim();
  await writeFile(files.loggedOut, '');
  sim.revokeToken(token);
  sim.dropWatches(); // the watches come back with the refused token: 401, and the plugin is asked again
  const loggedOutAt = Date.now();

  // The watches' 401 may show first ("the watch of services is failing: Unauthorized"); the plugin's words follow.
  const degraded = await eventually(
    async () => {
      const r = await route();
      return r.state === 'degraded' && /could not be obtained/.test(r.reason ?? '') && r;
    },
    8_000,
    200,
  );
  assert.match(degraded.reason ?? '', /^the credentials of context "\S+" could not be obtained: Error loading SSO Token: Token for my-sso does not exist$/);
  assert.ok(Date.now() - loggedOutAt < 5_000, `degraded ${Date.now() - loggedOutAt} ms after the session expired`);
  const table = await cli(['status']);
  assert.match(
    table.stdout,
    new RegExp(
      `${id}: route \\S+ \\(cluster [^)]*\\)[^\\n]*; degraded since [0-9:]+: the credentials of context "\\S+" could not be obtained: Error loading SSO Token`,
    ),
  );
  const doctor = await cli(['doctor', '--json', '--listen-socks', '127.0.0.1:0', '--kubeconfig', path.join(dir, 'kubeconfig')]);
  const daemon = (JSON.parse(doctor.stdout) as { checks: Array<{ name: string; status: string; detail: string }> }).checks.find((c) => c.name === 'daemon');
  assert.match(daemon?.detail ?? '', /degraded since \S+: the credentials of context "\S+" could not be obtained: Error loading SSO Token/, doctor.stdout);

  // A burst of requests, some to pods no tunnel reaches yet: each fails at once with the plugin's words.
  const before = await runs();
  const burstAt = Date.now();
  for (let round = 0; round < 3; round++) {
    const answers = await Promise.all(
      ['api.shop', 'web.shop:8080', 'echo.data:7000', 'hello.default'].map((host) =>
        curl(['-sS', '-w', '\n%{http_code}', '-x', `http://${httpProxy}`, `http://${host}/`]),
      ),
    );
    for (const a of answers) {
      assert.match(a.stdout, /could not be obtained: Error loading SSO Token[^\n]*\n+502$/);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  const elapsed = (Date.now() - burstAt) / 1000;
  const ran = (await runs()) - before;
  // Held 1 s, 2 s, 4 s, then 8 s: over ~3.5 s at most four runs, whatever the twelve requests and the retrying watches.
  assert.ok(ran <= 4, `the plugin ran ${ran} times in ${elapsed.toFixed(1)} s`);

  // The user logs in again: a new token, the plugin works.
  await writeFile(files.token, sim.issueToken());
  await rm(files.loggedOut);
  const loggedInAt = Date.now();
  await eventually(async () => (await route()).state === 'ready', 15_000, 250);
  const served = await eventually(
    async () => {
      const r = await curl(['-sS', '-x', `socks5h://${socks}`, 'http://api.shop/']);
      return /hello from/.test(r.stdout) && r;
    },
    5_000,
    200,
  );
  assert.ok(served);
  assert.ok(Date.now() - loggedInAt <= 12_000, `serving ${Date.now() - loggedInAt} ms after the login (the hold is at most 8 s)`);
});
