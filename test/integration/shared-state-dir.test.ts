// A state directory shared with a container: the real CLI in this pid namespace and in a second
// one (unshare --pid --mount-proc, entered with nsenter) over the same directory, as a container
// that mounts $HOME or an NFS home on two machines. Neither side can check the other's pids, so
// neither may declare the other's daemon dead, remove its files, or stop it; each keeps serving
// until its record is forgotten.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { statusItems } from '../helpers/status-json.js';

const canUnshare = process.platform === 'linux' && process.getuid?.() === 0;

let cluster: TestCluster;
let stateDir: string;
let container: ChildProcess | undefined;
/** The container's init, as this namespace numbers it. */
let containerInit: number;
/** Daemons started in this namespace: killed after, whatever failed. */
const daemons = new Set<number>();

const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: stateDir });
const here = (args: string[]) => runCli(args, { env: env() });

/** The CLI inside the container: its own pid namespace and /proc, the same files and network. */
const inContainer = (args: string[]) => runCli(args, { env: env(), via: ['nsenter', '--target', String(containerInit), '--pid', '--mount', '--'] });

interface Seen {
  id: string;
  state: string;
  elsewhere?: string;
  pid: number | null;
}

async function statesFrom(run: typeof here): Promise<Record<string, Seen>> {
  const r = await run(['status', '--json']);
  assert.equal(r.code, 0, r.stderr);
  return Object.fromEntries((statusItems(r.stdout) as Seen[]).map((s) => [s.id, s]));
}

const connectArgs = () => ['connect', '--socks', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--json'];
const kubeconfigOf = (id: string) => path.join(stateDir, 'proxies', id, 'kubeconfig');

describe('a state directory shared with a container', { skip: !canUnshare && 'needs root on Linux for a second pid namespace' }, () => {
  before(async () => {
    cluster = await startTestCluster();
    stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-shared-'));
    // The container's init is `sleep`; killing it ends every process in the namespace.
    container = spawn('unshare', ['--pid', '--fork', '--mount-proc', 'sleep', 'infinity'], { stdio: 'ignore' });
    await eventually(
      async () => {
        const children = readFileSync(`/proc/${container!.pid}/task/${container!.pid}/children`, 'utf8').trim();
        containerInit = Number(children.split(' ')[0]);
        return containerInit > 0;
      },
      5_000,
      20,
    );
  });

  after(async () => {
    await here(['quit']).catch(() => undefined);
    for (const pid of daemons) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
    if (containerInit > 0) process.kill(containerInit, 'SIGKILL');
    container?.kill('SIGKILL');
    await cluster?.close();
    rmSync(stateDir, { recursive: true, force: true });
  });

  test('each side sees the other as elsewhere, keeps its files, cannot stop it, and can forget it', async () => {
    const mine = await here(connectArgs());
    assert.equal(mine.code, 0, mine.stderr);
    const h = JSON.parse(mine.stdout) as { id: string; pid: number };
    daemons.add(h.pid);

    // The container's status: the host's proxy is not dead, and its credentials stay.
    const seen = await statesFrom(inContainer);
    assert.equal(seen[h.id]?.state, 'elsewhere', JSON.stringify(seen));
    assert.ok(seen[h.id]?.elsewhere, 'names the host it was recorded on');
    assert.ok(existsSync(kubeconfigOf(h.id)), "the host's kubeconfig is still there");

    // The same cluster view derives the same ID: taken, and said so, not "already running".
    const same = await inContainer(connectArgs());
    assert.equal(same.code, 1);
    assert.match(same.stderr, new RegExp(`ID ${h.id} is in use by a proxy that runs elsewhere .*--id`));

    const theirs = await inContainer([...connectArgs(), '--id', 'in-container']);
    assert.equal(theirs.code, 0, theirs.stderr);
    const c = JSON.parse(theirs.stdout) as { id: string; pid: number; env: Record<string, string> };
    const throughContainer = () => curl(['--proxy', c.env.ALL_PROXY!, 'http://web.shop:8080/']);
    assert.match((await throughContainer()).stdout, /hello from web-/);

    const states = await statesFrom(here);
    assert.equal(states[h.id]?.state, 'running');
    assert.equal(states['in-container']?.state, 'elsewhere');
    assert.equal(states['in-container']?.pid, c.pid, 'the pid as its own namespace numbers it');
    const table = await here(['status']);
    assert.match(
      table.stdout,
      /in-container: runs elsewhere \(recorded on host .*\); manage it there, or forget it here with: kubectl proxyout disconnect in-container --forget/,
    );

    const refused = await here(['disconnect', 'in-container']);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /proxy in-container runs elsewhere .*disconnect it there, or forget it here/);
    const reload = await here(['reload', 'in-container']);
    assert.equal(reload.code, 1);
    assert.match(reload.stderr, /runs elsewhere .*reload it there/);

    // --all stops what runs here and passes the container's by.
    const all = await here(['disconnect', '--all']);
    assert.equal(all.code, 0, all.stderr);
    assert.match(all.stdout, new RegExp(`disconnected ${h.id}`));
    assert.match(all.stdout, /left in-container \(context sim, namespace shop\) alone: it runs elsewhere/);
    assert.ok(existsSync(kubeconfigOf('in-container')));
    assert.match((await throughContainer()).stdout, /hello from web-/, 'the container still serves');
    assert.equal((await here(['quit'])).code, 0);
    assert.ok(existsSync(kubeconfigOf('in-container')), 'quit leaves it alone too');

    // Forgotten here, it stops there: no command on either side could see or stop it any more.
    const forget = await here(['disconnect', 'in-container', '--forget']);
    assert.equal(forget.code, 0, forget.stderr);
    assert.match(forget.stdout, /forgot in-container .*was not signalled, and stops there within seconds if it still runs/);
    assert.ok(!existsSync(path.join(stateDir, 'proxies', 'in-container')));
    await eventually(async () => (await throughContainer()).code !== 0, 15_000, 200);
    assert.match(readFileSync(path.join(stateDir, 'logs', 'in-container.log'), 'utf8'), /"reason":"state entry removed"/);
  });
});
