// Shell completion as a user gets it: real kubectl (≥ 1.26) finds bin/kubectl_complete-proxyout on
// PATH and runs it for `kubectl proxyout …<TAB>` (its hidden `__complete`, what the shell scripts
// of `kubectl completion bash|zsh|fish` call).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { connectManaged, managedCli } from '../helpers/managed-proxies.js';
import { repoRoot } from '../helpers/proxy-process.js';

const run = promisify(execFile);
let cluster: TestCluster;
let stateDir: string;

before(async () => {
  cluster = await startTestCluster();
  stateDir = path.join(cluster.dir, 'state');
});
after(async () => {
  await managedCli(stateDir).cli(['quit']);
  await cluster?.close();
});

/** `kubectl __complete proxyout WORDS…`: the candidates (value, description) and the directive. */
async function kubectlComplete(...words: string[]) {
  const env = {
    ...process.env,
    PATH: `${path.join(repoRoot, 'bin')}${path.delimiter}${process.env.PATH}`,
    KUBECONFIG: cluster.kubeconfig,
    KUBECTL_PROXYOUT_STATE_DIR: stateDir,
  };
  const { stdout } = await run('kubectl', ['__complete', 'proxyout', ...words], { env });
  const lines = stdout.trimEnd().split('\n');
  const directive = Number(lines.pop()!.slice(1));
  return { values: lines.map((l) => l.split('\t')[0]!), lines, directive };
}

test('kubectl completes commands, flags and their values through kubectl_complete-proxyout', async () => {
  const commands = await kubectlComplete('');
  assert.ok(
    ['connect', 'disconnect', 'status', 'exec', 'help'].every((c) => commands.values.includes(c)),
    commands.lines.join('\n'),
  );
  assert.ok(!commands.values.includes('daemon') && !commands.values.includes('serve'), 'hidden commands are not offered');
  assert.equal(commands.directive, 4);

  assert.deepEqual((await kubectlComplete('dis')).values, ['disconnect']);
  assert.deepEqual((await kubectlComplete('--log-l')).values, ['--log-level']);
  assert.deepEqual((await kubectlComplete('--log-level', 'd')).values, ['debug']);
  assert.deepEqual((await kubectlComplete('connect', '--transport=w')).values, ['--transport=websocket']);

  const contexts = await kubectlComplete('connect', '--context', '');
  const current = (await run('kubectl', ['config', 'current-context'], { env: { ...process.env, KUBECONFIG: cluster.kubeconfig } })).stdout.trim();
  assert.deepEqual(contexts.values, [current]);
  // A file flag leaves the shell its own file completion.
  assert.equal((await kubectlComplete('--kubeconfig', '')).directive, 0);
  assert.equal((await kubectlComplete('exec', '--', 'cu')).directive, 0);
});

test('connection IDs are offered where a command takes one, with what each proxy serves', async () => {
  assert.deepEqual((await kubectlComplete('disconnect', '')).values, []);
  const { id } = await connectManaged(stateDir, cluster.kubeconfig);
  for (const command of ['disconnect', 'logs', 'status', 'reload', 'pac']) {
    const ids = await kubectlComplete(command, '');
    assert.deepEqual(ids.values, [id], command);
    assert.match(ids.lines[0]!, /\tcontext \S+, namespace \S+$/);
  }
  assert.deepEqual((await kubectlComplete('disconnect', id, '')).values, [], 'one ID only');
  assert.deepEqual((await kubectlComplete('disconnect', 'zz')).values, []);
});
