// Managed background proxies, end to end: the real CLI (connect, status, disconnect, quit, logs)
// and real detached daemons against the simulated cluster, with a temporary state directory.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { execFileSync, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually, startTestCluster, unreachableKubeconfig, type TestCluster } from '../helpers/cluster.js';
import { runCli } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { isAlive } from '../../src/state/process.js';
import { statusItem, statusItems } from '../helpers/status-json.js';
import { TEST_CONNECT_PAUSE_ENV } from '../../src/managed/connect.js';
import { PROGRAM_THREADPOOL_SIZE } from '../../src/core/threadpool.js';

const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

let cluster: TestCluster;
let stateDir: string;
const daemons = new Set<number>();

interface Connected {
  id: string;
  pid: number;
  state: string;
  existing: boolean;
  context: string;
  namespace: string;
  socks: string | null;
  http: string | null;
  logFile: string;
  auth: { user: string; generated: boolean } | null;
  env: Record<string, string>;
}

const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: stateDir });
const cli = (args: string[], timeoutMs?: number, extraEnv: Record<string, string> = {}) => runCli(args, { env: { ...env(), ...extraEnv }, timeoutMs });
const mode = (p: string) => statSync(p).mode & 0o777;
const proxyDir = (id: string) => path.join(stateDir, 'proxies', id);

async function connect(args: string[] = [], kubeconfig = cluster.kubeconfig, extraEnv?: Record<string, string>): Promise<Connected> {
  const r = await cli(['connect', '--socks', '--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--json', ...args], undefined, extraEnv);
  assert.equal(r.code, 0, `connect failed: ${r.stderr}`);
  const out = JSON.parse(r.stdout) as Connected & { apiVersion: string; kind: string };
  assert.deepEqual([out.apiVersion, out.kind], ['kubectl-proxyout/v1', 'ConnectResult']);
  daemons.add(out.pid);
  return out;
}

async function status(id?: string): Promise<any> {
  const r = await cli(['status', ...(id ? [id] : []), '--json']);
  assert.equal(r.code, 0, r.stderr);
  return id ? statusItem(r.stdout) : statusItems(r.stdout);
}

async function gone(pid: number, ms: number): Promise<void> {
  await eventually(async () => !isAlive(pid), ms, 50);
}

/** Daemons whose command line names this state dir's IDs (Linux: count processes for real). */
function daemonsFor(id: string): number[] {
  if (process.platform !== 'linux') return [];
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      const at = argv.indexOf('daemon');
      if (at > 0 && argv[at + 1] === '--id' && argv[at + 2] === id && readFileSync(`/proc/${name}/environ`, 'utf8').includes(stateDir)) pids.push(Number(name));
    } catch {
      /* gone meanwhile */
    }
  }
  return pids;
}

before(async () => {
  cluster = await startTestCluster();
  stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-managed-'));
});

after(async () => {
  // No daemon may outlive the run, whatever failed above.
  await cli(['quit']).catch(() => undefined);
  for (const pid of daemons) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  await cluster?.close();
  rmSync(stateDir, { recursive: true, force: true });
});

describe('a managed proxy from connect to disconnect', () => {
  test('connect → curl → state files → status → logs → connect again → disconnect', async () => {
    const c = await connect();
    assert.match(c.id, /^[0-9a-f]{8}$/);
    assert.equal(c.context, 'sim');
    assert.equal(c.namespace, 'shop');
    assert.equal(c.existing, false);
    assert.match(c.socks!, /^127\.0\.0\.1:\d+$/);
    assert.equal(c.http, null);
    assert.equal(c.logFile, path.join(stateDir, 'logs', `${c.id}.log`));

    // No credentials asked for: connect generated some, and the printed proxy URL carries them.
    assert.deepEqual(c.auth, { user: 'proxyout', generated: true });
    const m = /^socks5h:\/\/proxyout:([A-Za-z0-9_-]{32})@(.+)$/.exec(c.env.ALL_PROXY!);
    assert.ok(m, c.env.ALL_PROXY);
    const password = m[1]!;
    assert.equal(m[2], c.socks);
    const r = await curl(['--proxy', c.env.ALL_PROXY!, 'http://web.shop:8080/']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /hello from web-/);
    const anonymous = await curl(['--proxy', `socks5h://${c.socks}`, 'http://web.shop:8080/']);
    assert.notEqual(anonymous.code, 0, 'another local user without the password is refused');
    assert.equal(mode(path.join(proxyDir(c.id), 'client-auth')), 0o600, 'kept private in the state directory');

    // State layout and modes, as documented.
    for (const dir of [stateDir, path.join(stateDir, 'proxies'), path.join(stateDir, 'logs'), proxyDir(c.id)]) assert.equal(mode(dir), 0o700, dir);
    for (const file of ['state.json', 'kubeconfig', 'control.sock']) assert.equal(mode(path.join(proxyDir(c.id), file)), 0o600, file);
    assert.equal(mode(c.logFile), 0o600);
    const state = JSON.parse(readFileSync(path.join(proxyDir(c.id), 'state.json'), 'utf8'));
    assert.equal(state.pid, c.pid);
    assert.equal(state.phase, 'running');
    assert.equal(state.programVersion, PACKAGE_VERSION, 'the version that started it is recorded');
    assert.ok(!readFileSync(path.join(proxyDir(c.id), 'state.json'), 'utf8').includes(cluster.sim.adminToken), 'state.json holds no token');
    const kc = JSON.parse(readFileSync(path.join(proxyDir(c.id), 'kubeconfig'), 'utf8'));
    assert.equal(kc.contexts.length, 1);
    assert.ok(kc.clusters[0].cluster['certificate-authority-data']);

    // Bytes count while they flow: a stream still open shows what it moved so far.
    const echo = await socks5Connect(c.socks!, 'echo.data', 7000, { auth: { user: 'proxyout', password } });
    assert.equal(echo.reply, 0);
    const chunk = Buffer.alloc(256 * 1024, 7);
    echo.socket.write(chunk);
    let echoed = echo.rest.length;
    echo.socket.on('data', (d: Buffer) => (echoed += d.length));
    echo.socket.resume();
    await eventually(async () => echoed === chunk.length, 8_000);
    const live = (await status(c.id)) as { openStreams: number; bytesFromClients: number; bytesToClients: number };
    assert.ok(live.openStreams >= 1, 'the echo stream is still open');
    assert.ok(live.bytesFromClients >= chunk.length && live.bytesToClients >= chunk.length, `status counts an open stream's bytes: ${JSON.stringify(live)}`);
    echo.socket.destroy();

    // The stream closes a quiet second after curl's FIN (v4 has no half-close): poll for it.
    const s = await eventually(async () => {
      const [row] = (await status()) as any[];
      return row?.openStreams === 0 && row;
    }, 8_000);
    assert.equal(s.id, c.id);
    assert.equal(s.state, 'running');
    assert.equal(s.pid, c.pid);
    assert.equal(s.socks, c.socks);
    assert.ok(s.totalStreams >= 1, 'live counters from the daemon');
    assert.ok(s.bytesToClients > 0 && s.bytesFromClients > 0);
    assert.equal(s.cache.state, 'synced');
    assert.ok(s.uptimeSeconds >= 0);
    const one = await status(c.id);
    assert.equal(one.id, c.id, 'status ID lists that proxy alone');
    const text = await cli(['status']);
    assert.match(text.stdout, new RegExp(`^${c.id} +running +sim +shop +${c.pid} `, 'm'));
    for (const out of [JSON.stringify(s), JSON.stringify(one), text.stdout, (await cli(['status', c.id])).stdout])
      assert.ok(!out.includes(password), 'status never prints the password');
    assert.ok(!readFileSync(path.join(proxyDir(c.id), 'state.json'), 'utf8').includes(password), 'state.json holds no password');

    // A ready proxy whose streams are refused says so: the last failure, while it is news (the
    // anonymous client's, above, until this one).
    assert.match(text.stdout, new RegExp(`^${c.id}: the last stream failed \\d+ s ago: proxy authentication is on`, 'm'));
    const refused = await curl(['--proxy', c.env.ALL_PROXY!, 'http://missing.shop:8080/']);
    assert.notEqual(refused.code, 0);
    const failing = await cli(['status']);
    assert.match(
      failing.stdout,
      new RegExp(
        `^${c.id}: the last stream failed \\d+ s ago \\(to missing\\.shop:8080\\): .*missing.*; no stream opened since; see kubectl proxyout logs ${c.id}$`,
        'm',
      ),
    );
    assert.equal(((await status(c.id)) as { lastFailure: { reason: string } }).lastFailure.reason, 'unknown-target');
    assert.equal((await curl(['--proxy', c.env.ALL_PROXY!, 'http://web.shop:8080/'])).code, 0);
    assert.doesNotMatch((await cli(['status'])).stdout, /no stream opened since/, 'one opened since');

    const logs = await cli(['logs', c.id]);
    assert.equal(logs.code, 0, logs.stderr);
    assert.match(logs.stdout, /INFO {2}daemon ready/);
    assert.match(logs.stdout, /stream closed .*target=web\.shop:8080/);
    const raw = await cli(['logs', c.id, '--json']);
    assert.ok(
      raw.stdout
        .trim()
        .split('\n')
        .every((l) => JSON.parse(l).msg !== undefined),
    );
    assert.ok(!raw.stdout.includes(password) && !readFileSync(c.logFile, 'utf8').includes(password), 'the log never holds the password');

    // Connecting again to the same place: the same ID, the same process.
    const again = await connect();
    assert.equal(again.id, c.id);
    assert.equal(again.pid, c.pid);
    assert.equal(again.existing, true);
    assert.equal(again.socks, c.socks);
    assert.equal(again.env.ALL_PROXY, c.env.ALL_PROXY, 'connect prints the same credentials again');
    const human = await cli(['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0']);
    assert.match(human.stderr, new RegExp(`^kubectl-proxyout: ${c.id} is already running \\(pid ${c.pid}\\)`));
    assert.ok(human.stdout.includes(`export ALL_PROXY=${c.env.ALL_PROXY}`), human.stdout);
    assert.match(human.stderr, /generated password for user proxyout/);
    // stdout is the shell lines alone: eval'd, they set the variables (stderr is for the person).
    assert.ok(
      human.stdout.split('\n').every((l) => l === '' || /^(export|unset) /.test(l)),
      human.stdout,
    );
    const evaluated = spawnSync('bash', ['-c', 'eval "$1" && printf %s "$ALL_PROXY"', 'bash', human.stdout], { encoding: 'utf8' });
    assert.equal(evaluated.stdout, c.env.ALL_PROXY, evaluated.stderr);
    if (process.platform === 'linux') assert.deepEqual(daemonsFor(c.id), [c.pid]);
    // A threadpool that lets its direct routes look up several names at once (core/threadpool.ts):
    // libuv started all of it, beside Node's own threads, and the variable that sized it is not
    // in the environment the daemon's children get.
    if (process.platform === 'linux' && process.env.UV_THREADPOOL_SIZE === undefined) {
      assert.ok(readdirSync(`/proc/${c.pid}/task`).length >= PROGRAM_THREADPOOL_SIZE, 'the daemon runs a threadpool of 16');
      assert.doesNotMatch(readFileSync(`/proc/${c.pid}/environ`, 'latin1'), /(^|\0)UV_THREADPOOL_SIZE=/);
    }
    assert.doesNotMatch(human.stderr + (await cli(['status'])).stdout, /started by/, 'this version started it');
    // After an upgrade the daemon still runs the code it started with: status, doctor and connect say so.
    const stateFile = path.join(proxyDir(c.id), 'state.json');
    const recorded = readFileSync(stateFile, 'utf8');
    writeFileSync(stateFile, JSON.stringify({ ...JSON.parse(recorded), programVersion: '0.0.1' }), { mode: 0o600 });
    const upgrade = `started by kubectl-proxyout 0\\.0\\.1, this is ${PACKAGE_VERSION.replace(/\./g, '\\.')}; disconnect ${c.id} and connect it again to run this one`;
    assert.match((await cli(['status'])).stdout, new RegExp(`^${c.id}: ${upgrade}$`, 'm'));
    assert.equal(((await status(c.id)) as { version: string }).version, '0.0.1');
    assert.match((await cli(['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0'])).stderr, new RegExp(`${c.id} was ${upgrade}`));
    assert.match((await cli(['doctor', '--kubeconfig', cluster.kubeconfig])).stdout, new RegExp(`${c.id} .* was started by kubectl-proxyout 0\\.0\\.1`));
    writeFileSync(stateFile, recorded, { mode: 0o600 });
    // The same context name, server and namespace in another kubeconfig, as another identity (an
    // exec plugin here): not "already running", which would hand over this proxy's rights.
    const otherIdentity = path.join(stateDir, 'kubeconfig-other-identity');
    await cluster.sim.writeKubeconfig(otherIdentity, { namespace: 'shop', auth: 'exec' });
    const taken = await cli(['connect', '--kubeconfig', otherIdentity, '--listen-socks', '127.0.0.1:0']);
    assert.equal(taken.code, 1, taken.stderr);
    assert.match(
      taken.stderr,
      new RegExp(
        `ID ${c.id} is already used by the proxy for context sim, namespace shop with other credentials \\(kubeconfig user "[^"]+" from ${cluster.kubeconfig.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}; this connect: kubeconfig user "[^"]+" from ${otherIdentity.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\); disconnect it first`,
      ),
    );
    // Asking by flag for what the running proxy does not have is an error, not "already running".
    const other = await cli([
      'connect',
      '--kubeconfig',
      cluster.kubeconfig,
      '--listen-socks',
      '127.0.0.1:0',
      '--listen-http',
      '127.0.0.1:0',
      '--transport',
      'websocket',
    ]);
    assert.equal(other.code, 1, other.stdout);
    assert.match(
      other.stderr,
      new RegExp(
        `proxy ${c.id} is already running with other settings: --listen-http \\(running: off, asked: 127\\.0\\.0\\.1:0\\); --transport \\(running: auto, asked: websocket\\)`,
      ),
    );
    assert.match(other.stderr, new RegExp(`kubectl proxyout disconnect ${c.id}`));
    const authFile = path.join(stateDir, 'auth-for-conflict');
    await writeFile(authFile, 'alice:s3cret-pw\n', { mode: 0o600 });
    const withAuth = await cli(['connect', '--kubeconfig', cluster.kubeconfig, '--proxy-auth-file', authFile]);
    assert.equal(withAuth.code, 1);
    assert.match(withAuth.stderr, /proxy authentication \(running: user proxyout, asked: user alice\)/);
    assert.ok(!withAuth.stderr.includes('s3cret-pw') && !withAuth.stderr.includes(password));
    const noAuth = await cli(['connect', '--kubeconfig', cluster.kubeconfig, '--no-proxy-auth']);
    assert.equal(noAuth.code, 1);
    assert.match(noAuth.stderr, /proxy authentication \(running: user proxyout, asked: off with --no-proxy-auth\)/);
    if (process.platform === 'linux') assert.deepEqual(daemonsFor(c.id), [c.pid], 'nothing new was started');

    const d = await cli(['disconnect', c.id]);
    assert.equal(d.code, 0, d.stderr);
    assert.match(d.stdout, new RegExp(`disconnected ${c.id}`));
    await gone(c.pid, 5_000);
    assert.ok(!existsSync(proxyDir(c.id)), 'state, kubeconfig and socket removed');
    assert.ok(existsSync(c.logFile), 'the log is kept');
    const log = readFileSync(c.logFile, 'utf8');
    assert.match(log, /"msg":"daemon exited"/);
    assert.ok(!log.includes(cluster.sim.adminToken), 'the token never reaches the log');
    assert.deepEqual(await status(), []);
    const stoppedLogs = await cli(['logs', c.id]);
    assert.match(stoppedLogs.stdout, /daemon exited/, 'logs of a stopped proxy');
  });

  test('concurrent connects → one daemon, even when each found none', async () => {
    // Each connect is held after it found no daemon, until all three have: then they take the
    // state lock one after another, and all but the first must see its daemon there.
    const pauses = mkdtempSync(path.join(tmpdir(), 'proxyout-connect-race-'));
    const holds = [1, 2, 3].map((i) => path.join(pauses, `connect-${i}`));
    const running = holds.map((hold) => connect(['--id', 'race'], cluster.kubeconfig, { [TEST_CONNECT_PAUSE_ENV]: hold }));
    await eventually(async () => holds.every((hold) => existsSync(`${hold}.waiting`)), 20_000, 20);
    for (const hold of holds) writeFileSync(hold, '');
    const results = await Promise.all(running);
    rmSync(pauses, { recursive: true, force: true });
    const pids = new Set(results.map((r) => r.pid));
    assert.equal(pids.size, 1, `one daemon, got ${[...pids].join(', ')}`);
    assert.equal(results.filter((r) => !r.existing).length, 1, 'exactly one started it');
    if (process.platform === 'linux') assert.deepEqual(daemonsFor('race'), [...pids]);
    assert.equal((await cli(['disconnect', 'race'])).code, 0);
  });

  test('two connects racing for one port: the loser is told which proxy took it', async () => {
    const free = net.createServer().listen(0, '127.0.0.1');
    await once(free, 'listening');
    const port = (free.address() as net.AddressInfo).port;
    await new Promise((r) => free.close(r));
    // Both are held after their own checks found the port free, until both are there.
    const pauses = mkdtempSync(path.join(tmpdir(), 'proxyout-port-race-'));
    const ids = ['port-a', 'port-b'];
    const running = ids.map((id) =>
      cli(['connect', '--kubeconfig', cluster.kubeconfig, '--id', id, '--listen-socks', `127.0.0.1:${port}`, '--json'], undefined, {
        [TEST_CONNECT_PAUSE_ENV]: path.join(pauses, id),
      }),
    );
    await eventually(async () => ids.every((id) => existsSync(path.join(pauses, `${id}.waiting`))), 20_000, 20);
    for (const id of ids) writeFileSync(path.join(pauses, id), '');
    const results = await Promise.all(running);
    rmSync(pauses, { recursive: true, force: true });
    const won = results.findIndex((r) => r.code === 0);
    assert.ok(won >= 0, results.map((r) => r.stderr).join('\n'));
    daemons.add((JSON.parse(results[won]!.stdout) as Connected).pid);
    const lost = results[1 - won]!;
    assert.equal(lost.code, 1);
    assert.match(lost.stderr, new RegExp(`--listen-socks 127\\.0\\.0\\.1:${port}: the address is taken by managed proxy ${ids[won]}`));
    assert.ok(!existsSync(path.join(stateDir, 'logs', `${ids[1 - won]}.log`)), 'no daemon was started for the loser');
    assert.equal((await cli(['disconnect', ids[won]!])).code, 0);
  });
});

describe('a daemon whose cache is still syncing', () => {
  test('status answers while it starts and shows per kind what is listed so far', async () => {
    // Watch-lists end before their first event, and the LIST the informer falls back to gets no
    // answer, until these are turned off: the first sync keeps retrying.
    cluster.sim.endWatchesAtOnce(true);
    cluster.sim.stallLists(true);
    let connecting: Promise<{ code: number | null; stdout: string; stderr: string }> | undefined;
    try {
      connecting = cli(['connect', '--socks', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--json', '--id', 'syncing']);
      const row = await eventually(
        async () => {
          const r = await status('syncing').catch(() => undefined);
          return r?.state === 'starting' && r.cache?.syncing ? r : undefined;
        },
        20_000,
        200,
      );
      // Its first attempts failed: "retrying", with what the attempt under way has listed.
      assert.match(row.cache.state, /^(syncing|retrying)$/);
      assert.deepEqual(row.cache.syncing.services, { listed: 0 });
      const table = await cli(['status', 'syncing']);
      assert.match(table.stdout, /(syncing|retrying) \(.*services 0/);
    } finally {
      cluster.sim.endWatchesAtOnce(false);
      cluster.sim.stallLists(false);
    }
    const r = await connecting!;
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as Connected;
    daemons.add(out.pid);
    const synced = await status('syncing');
    assert.equal(synced.cache.state, 'synced');
    assert.equal((await cli(['disconnect', 'syncing'])).code, 0);
    await gone(out.pid, 10_000);
  });
});

describe('stopped while its cache syncs', () => {
  test('disconnect during the first sync: the daemon exits at once, its state goes, nothing is killed', async () => {
    // Watches and lists get no answer: the first sync cannot finish while this is on.
    cluster.sim.stallWatches(true);
    cluster.sim.stallLists(true);
    try {
      const connecting = cli(['connect', '--socks', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--json', '--id', 'early-stop']);
      const row = await eventually(
        async () => {
          const r = await status('early-stop').catch(() => undefined);
          // Per-kind progress comes from the daemon itself: it is up and in its first sync.
          return r?.state === 'starting' && r.pid && r.cache?.syncing ? r : undefined;
        },
        20_000,
        200,
      );
      const d = await cli(['disconnect', 'early-stop']);
      assert.equal(d.code, 0, d.stderr);
      assert.match(d.stdout, /disconnected early-stop/);
      assert.doesNotMatch(d.stdout, /killed/);
      await gone(row.pid as number, 5_000);
      assert.equal(existsSync(proxyDir('early-stop')), false, 'its state is removed');
      const c = await connecting;
      assert.notEqual(c.code, 0, 'the connect that was waiting says it did not start');
    } finally {
      cluster.sim.stallWatches(false);
      cluster.sim.stallLists(false);
    }
  });
});

describe('several proxies', () => {
  test('two contexts on their own ports, then disconnect --all', async () => {
    const other = path.join(cluster.dir, 'other-context');
    await cluster.sim.writeKubeconfig(other, { context: 'other', namespace: 'default' });
    const [a, b] = await Promise.all([connect(['--listen-http', '127.0.0.1:0']), connect(['--no-proxy-auth'], other)]);
    assert.notEqual(a.id, b.id);
    assert.notEqual(a.socks, b.socks);
    assert.equal(b.context, 'other');
    assert.match(a.http!, /^127\.0\.0\.1:\d+$/);
    // --no-proxy-auth (for browsers): no credentials, as before generated ones existed.
    assert.equal(b.auth, null);
    assert.equal(b.env.ALL_PROXY, `socks5h://${b.socks}`);
    assert.ok(!existsSync(path.join(proxyDir(b.id), 'client-auth')));
    assert.match((await curl(['--proxy', `socks5h://${b.socks}`, 'http://web.shop:8080/'])).stdout, /hello from web-/);
    assert.match(a.env.HTTP_PROXY!, new RegExp(`^http://proxyout:[A-Za-z0-9_-]{32}@${a.http}$`));
    assert.match((await curl(['-x', a.env.HTTP_PROXY!, 'http://web.shop:8080/'])).stdout, /hello from web-/);
    assert.match((await curl(['--write-out', '%{http_code}', '-x', `http://${a.http}`, 'http://web.shop:8080/'])).stdout, /407$/);
    const ids = ((await status()) as any[]).map((s) => s.id).sort();
    assert.deepEqual(ids, [a.id, b.id].sort());

    const d = await cli(['disconnect', '--all']);
    assert.equal(d.code, 0, d.stderr);
    await gone(a.pid, 5_000);
    await gone(b.pid, 5_000);
    assert.deepEqual(readdirSync(path.join(stateDir, 'proxies')), []);
    assert.ok(existsSync(a.logFile) && existsSync(b.logFile));
  });

  test('quit stops everything and removes transient files; logs stay', async () => {
    const [a, b] = await Promise.all([connect(['--id', 'quit-a']), connect(['--id', 'quit-b'])]);
    const q = await cli(['quit']);
    assert.equal(q.code, 0, q.stderr);
    assert.match(q.stdout, /disconnected quit-a/);
    assert.match(q.stdout, /disconnected quit-b/);
    assert.ok(!isAlive(a.pid) && !isAlive(b.pid));
    assert.deepEqual(readdirSync(path.join(stateDir, 'proxies')), []);
    assert.ok(existsSync(a.logFile) && existsSync(b.logFile));
    assert.match((await cli(['quit'])).stdout, /no managed proxies/);
  });
});

describe('crashes and failures', () => {
  test('SIGKILLed daemon: status says dead and drops its credentials; disconnect cleans it', async () => {
    const c = await connect(['--id', 'crash']);
    process.kill(c.pid, 'SIGKILL');
    await gone(c.pid, 5_000);
    const s = await status('crash');
    assert.equal(s.state, 'dead');
    assert.equal(s.socks, null);
    assert.match(s.error, /is gone/);
    assert.ok(!existsSync(path.join(proxyDir('crash'), 'kubeconfig')), 'the kubeconfig is reaped at once');
    assert.ok(!existsSync(path.join(proxyDir('crash'), 'client-auth')), 'so are its generated credentials');
    assert.match((await cli(['status'])).stdout, /crash: dead .*disconnect crash/);
    const d = await cli(['disconnect', 'crash']);
    assert.equal(d.code, 0, d.stderr);
    assert.match(d.stdout, /was not running/);
    assert.ok(!existsSync(proxyDir('crash')));
  });

  test('a stopped (SIGSTOP) daemon: status says it does not answer, and disconnect still stops it', async () => {
    const c = await connect(['--id', 'frozen']);
    assert.equal((await status('frozen')).answering, true);
    process.kill(c.pid, 'SIGSTOP');
    try {
      const s = await status('frozen');
      assert.deepEqual([s.state, s.answering, s.openStreams], ['running', false, null]);
      assert.match((await cli(['status'])).stdout, /^frozen: does not answer on its control socket .*disconnect frozen$/m);
    } finally {
      process.kill(c.pid, 'SIGCONT');
    }
    assert.equal((await status('frozen')).answering, true);
    assert.doesNotMatch((await cli(['status'])).stdout, /does not answer/);
    assert.equal((await cli(['disconnect', 'frozen'])).code, 0);
  });

  test('a taken port: a clear error, a hint, and nothing left behind', async () => {
    const blocker = net.createServer().listen(0, '127.0.0.1');
    await once(blocker, 'listening');
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const r = await cli(['connect', '--kubeconfig', cluster.kubeconfig, '--id', 'taken', '--listen-socks', `127.0.0.1:${port}`]);
      assert.equal(r.code, 1);
      assert.equal(r.stdout, '');
      assert.match(
        r.stderr.trim(),
        new RegExp(`^Error: --listen-socks 127\\.0\\.0\\.1:${port}: the address is already in use .*--listen-socks 127\\.0\\.0\\.1:0`),
      );
      assert.ok(!existsSync(proxyDir('taken')));
      assert.ok(!existsSync(path.join(stateDir, 'logs', 'taken.log')), 'no daemon was started');
    } finally {
      blocker.close();
    }
    const a = await connect(['--id', 'holder']);
    const r = await cli(['connect', '--kubeconfig', cluster.kubeconfig, '--id', 'second', '--listen-socks', a.socks!]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /taken by managed proxy holder .*127\.0\.0\.1:0/);
    assert.ok(!existsSync(proxyDir('second')));
    // The foreground proxy on that port (the README's `kubectl proxyout` after a connect) names it too.
    const fg = await cli(['--kubeconfig', cluster.kubeconfig, '--listen-socks', a.socks!]);
    assert.equal(fg.code, 1);
    assert.equal(
      fg.stderr.trim(),
      `Error: cannot listen for SOCKS on ${a.socks}: address already in use: managed proxy holder (context sim, namespace shop) listens there; use it, stop it with \`kubectl proxyout disconnect holder\`, or pick another port`,
    );
    assert.equal((await cli(['disconnect', 'holder'])).code, 0);
  });

  test('API unreachable: connect fails fast and leaves no state', async () => {
    const file = await unreachableKubeconfig(cluster);
    const started = Date.now();
    const r = await cli(['connect', '--kubeconfig', file, '--listen-socks', '127.0.0.1:0']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^Error: cannot reach the API server/);
    assert.ok(Date.now() - started < 15_000);
    assert.deepEqual(readdirSync(path.join(stateDir, 'proxies')), []);
  });

  test('a full disk: connect says where it could not write, and leaves nothing behind', async (t) => {
    if (process.platform !== 'linux' || process.getuid?.() !== 0) return t.skip('needs root on Linux to mount a small tmpfs');
    const full = mkdtempSync(path.join(tmpdir(), 'proxyout-full-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k,mode=0700', 'tmpfs', full]);
    } catch (err) {
      rmSync(full, { recursive: true, force: true });
      return t.skip(`cannot mount a tmpfs here: ${String(err)}`);
    }
    t.after(() => {
      execFileSync('umount', ['-l', full]);
      rmSync(full, { recursive: true, force: true });
    });
    const state = path.join(full, 'state');
    // The directories first (they take no space on a tmpfs), then every byte taken.
    const ok = await runCli(['status'], { env: { KUBECTL_PROXYOUT_STATE_DIR: state } });
    assert.equal(ok.code, 0, ok.stderr);
    try {
      execFileSync('dd', ['if=/dev/zero', `of=${path.join(full, 'filler')}`, 'bs=4k'], { stdio: 'ignore' });
    } catch {
      // ENOSPC: full, as wanted
    }
    const r = await runCli(['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0'], { env: { KUBECTL_PROXYOUT_STATE_DIR: state } });
    assert.equal(r.code, 1);
    assert.match(r.stderr.trim(), new RegExp(`^Error: cannot write the proxy's files in ${path.join(state, 'proxies')}/\\w+: ENOSPC`), r.stderr);
    assert.deepEqual(readdirSync(path.join(state, 'proxies')), [], 'no directory left behind');
  });

  test('bad credentials and unknown contexts fail before forking', async () => {
    const file = path.join(cluster.dir, 'badtoken');
    await writeFile(file, cluster.sim.kubeconfigYaml({ token: 'not-a-valid-token' }), { mode: 0o600 });
    const bad = await cli(['connect', '--kubeconfig', file, '--listen-socks', '127.0.0.1:0']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /rejected the credentials/);
    const ctx = await cli(['connect', '--kubeconfig', cluster.kubeconfig, '--context', 'nope', '--listen-socks', '127.0.0.1:0']);
    assert.equal(ctx.code, 1);
    assert.match(ctx.stderr, /context "nope" not found/);
    assert.deepEqual(readdirSync(path.join(stateDir, 'proxies')), []);
  });

  test('unknown IDs and bad IDs are clear errors', async () => {
    for (const args of [
      ['disconnect', 'nope'],
      ['status', 'nope'],
      ['logs', 'nope'],
      ['disconnect', '../x'],
      ['reload', '../x'],
      ['logs', '../x'],
      // A new ID that a command would read as a flag: `disconnect --all` would stop every proxy.
      ['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--id=--all'],
      ['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--id=-x'],
    ]) {
      const r = await cli(args);
      assert.notEqual(r.code, 0, args.join(' '));
      assert.match(r.stderr.trim(), /^Error: (no managed proxy with ID nope|no log for ID nope|invalid connection ID)/, r.stderr);
      assert.equal(r.stderr.trim().split('\n').length, 1, `${args.join(' ')}: one line, no stack: ${r.stderr}`);
    }
    assert.deepEqual(readdirSync(path.join(stateDir, 'proxies')), [], 'no proxy was started for them');
    const both = await cli(['disconnect']);
    assert.equal(both.code, 2);
    // None runs: reload says how a foreground proxy is reloaded instead.
    const none = await cli(['reload']);
    assert.equal(none.code, 1);
    assert.match(none.stderr.trim(), /^Error: no managed proxy is running \(a foreground proxy re-reads its routing table on SIGHUP: kill -HUP PID\)$/);
    // An ID is an argument, never stdin: a script that pipes into the command does not choose it.
    for (const args of [['status'], ['disconnect'], ['logs'], ['reload'], ['pac']]) {
      const r = await runCli(args, { env: env(), input: 'nope\n' });
      assert.doesNotMatch(r.stderr, /ID nope/, `${args[0]} took its ID from stdin`);
    }
  });
});

describe('the daemon', () => {
  test('exec-plugin credentials work from the transient kubeconfig; SIGHUP reopens the log; logs -f ends with the proxy', async () => {
    const file = path.join(cluster.dir, 'exec');
    await cluster.sim.writeKubeconfig(file, { auth: 'exec', context: 'execy', namespace: 'shop' });
    const c = await connect(['--id', 'execy'], file);
    const kc = JSON.parse(readFileSync(path.join(proxyDir('execy'), 'kubeconfig'), 'utf8'));
    assert.equal(kc.users[0].user.exec.command, process.execPath, 'exec kept as it was');
    assert.match((await curl(['--proxy', c.env.ALL_PROXY!, 'http://web.shop:8080/'])).stdout, /hello from web-/);

    renameSync(c.logFile, `${c.logFile}.1`);
    process.kill(c.pid, 'SIGHUP');
    await eventually(async () => existsSync(c.logFile) && readFileSync(c.logFile, 'utf8').includes('log file reopened'), 5_000, 50);
    assert.equal(mode(c.logFile), 0o600);

    // A tokenFile user (kubectl's field) stays a file in the transient kubeconfig, so rotation reaches the daemon.
    const tokenFile = path.join(cluster.dir, 'managed-token');
    await writeFile(tokenFile, `${cluster.sim.adminToken}\n`, { mode: 0o600 });
    const tfKubeconfig = path.join(cluster.dir, 'kc-token-file');
    await writeFile(
      tfKubeconfig,
      cluster.sim.kubeconfigYaml({ token: 'PLACEHOLDER', namespace: 'shop' }).replace('token: "PLACEHOLDER"', 'tokenFile: "managed-token"'),
      { mode: 0o600 },
    );
    // --shutdown-grace 0: its disconnect does not wait ~1 s for curl's stream (the simulated runtime's close grace).
    const tf = await connect(['--id', 'tokenfile', '--shutdown-grace', '0'], tfKubeconfig);
    const tfKc = JSON.parse(readFileSync(path.join(proxyDir('tokenfile'), 'kubeconfig'), 'utf8'));
    assert.deepEqual(tfKc.users[0].user, { tokenFile }, 'an absolute tokenFile, no token copied');
    assert.match((await curl(['--proxy', tf.env.ALL_PROXY!, 'http://web.shop:8080/'])).stdout, /hello from web-/);
    assert.equal((await cli(['disconnect', 'tokenfile'])).code, 0);

    // NODE_OPTIONS=--inspect in the caller's shell: the daemon, which lives all day, opens no inspector.
    const inspected = await connect(['--id', 'no-inspector', '--shutdown-grace', '0'], cluster.kubeconfig, {
      NODE_OPTIONS: '--inspect=127.0.0.1:0 --max-old-space-size=512',
    });
    if (process.platform === 'linux') {
      const environ = readFileSync(`/proc/${inspected.pid}/environ`, 'utf8').split('\0');
      assert.ok(environ.includes('NODE_OPTIONS=--max-old-space-size=512'), environ.filter((e) => e.startsWith('NODE_OPTIONS')).join(' '));
    }
    assert.doesNotMatch(readFileSync(inspected.logFile, 'utf8'), /Debugger listening/);
    assert.equal((await cli(['disconnect', 'no-inspector'])).code, 0);

    const follow = cli(['logs', 'execy', '-f'], 20_000);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await cli(['disconnect', 'execy'])).code, 0);
    const f = await follow;
    assert.equal(f.code, 0, f.stderr);
    assert.match(f.stdout, /daemon exited/, 'followed to the end, then returned');
  });
});
