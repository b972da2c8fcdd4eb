// Managed background proxies, end to end: the real CLI (connect, status, disconnect, quit, logs)
// and real detached daemons against the simulated cluster, with a temporary state directory.
// One proxy's life here, from connect to disconnect, connects that race, and several proxies; the
// rest (syncing, crashes and failures, the daemon) in managed-daemons.test.ts: one file took
// close to the runner's per-file timeout on a loaded machine.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually } from '../helpers/cluster.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { isAlive } from '../../src/state/process.js';
import { TEST_CONNECT_PAUSE_ENV } from '../../src/managed/connect.js';
import { PROGRAM_THREADPOOL_SIZE } from '../../src/core/threadpool.js';
import { cluster, stateDir, daemons, type Connected, cli, mode, proxyDir, connect, status, gone, daemonsFor, useManagedBed } from '../helpers/managed-bed.js';

const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

useManagedBed();

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
