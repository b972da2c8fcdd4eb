// The GitHub workflows cannot run on this machine; what can be checked here is that they ask for
// what the project's CI and release need and refer only to what exists: the CI matrix (ubuntu, macOS, Windows ×
// Node 20/22/24 with kubectl and Chromium), the release's five platform builds on their own
// runners, and every npm script and script file a step runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import yaml from 'js-yaml';
import { repoRoot } from '../helpers/proxy-process.js';

interface Step {
  uses?: string;
  run?: string;
  with?: Record<string, unknown>;
}
interface Job {
  'runs-on'?: string;
  needs?: string | string[];
  strategy?: { matrix?: Record<string, unknown> & { include?: Array<Record<string, string>> } };
  steps?: Step[];
}
interface Workflow {
  on?: unknown;
  jobs?: Record<string, Job>;
}

function workflow(name: string): Workflow {
  return yaml.load(readFileSync(path.join(repoRoot, '.github', 'workflows', name), 'utf8')) as Workflow;
}

const scripts = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;

/** Every `npm run X` names a script of package.json; every `node scripts/…`/`dist/…` file path is one this repo has or builds. */
function checkRuns(steps: Step[], where: string): void {
  for (const step of steps) {
    for (const [, name] of (step.run ?? '').matchAll(/npm run ([\w:-]+)/g)) assert.ok(scripts[name!], `${where}: npm run ${name} is a script of package.json`);
    for (const [, file] of (step.run ?? '').matchAll(/node (scripts\/[\w./-]+)/g))
      assert.ok(existsSync(path.join(repoRoot, file!)), `${where}: ${file} exists`);
    for (const [, file] of (step.run ?? '').matchAll(/(dist\/test\/[\w./-]+\.js)/g)) {
      const source = file!.replace(/^dist\//, '').replace(/\.js$/, '.ts');
      assert.ok(existsSync(path.join(repoRoot, source)), `${where}: ${file} is built from ${source}`);
    }
  }
}

test('CI: ubuntu, macOS and Windows on Node 20, 22 and 24, with kubectl and Chromium, packaging before the tests', () => {
  const ci = workflow('ci.yml');
  const job = ci.jobs!.test!;
  assert.deepEqual(job.strategy!.matrix!.os, ['ubuntu-latest', 'macos-latest', 'windows-latest']);
  assert.deepEqual(job.strategy!.matrix!.node, [20, 22, 24]);
  const uses = job.steps!.map((s) => s.uses ?? '');
  assert.ok(
    uses.some((u) => u.startsWith('azure/setup-kubectl')),
    'kubectl is installed',
  );
  assert.ok(
    uses.some((u) => u.startsWith('browser-actions/setup-chrome')),
    'Chromium is installed',
  );
  const runs = job.steps!.map((s) => s.run ?? '');
  const order = ['npm ci', 'npm run package', 'npm test'].map((cmd) => runs.findIndex((r) => r.trim() === cmd));
  assert.ok(order.every((i) => i >= 0) && order[0]! < order[1]! && order[1]! < order[2]!, `npm ci, npm run package, npm test in that order: ${order}`);
  checkRuns(job.steps!, 'ci.yml');
});

test('release: the five platforms each on its own runner, the krew manifest rendered from their archives', () => {
  const release = workflow('release.yml');
  const pkg = release.jobs!.package!;
  const targets = pkg.strategy!.matrix!.include!.map((t) => `${t.goos}/${t.goarch}`).sort();
  assert.deepEqual(targets, ['darwin/amd64', 'darwin/arm64', 'linux/amd64', 'linux/arm64', 'windows/amd64']);
  const runners = pkg.strategy!.matrix!.include!.map((t) => t.runner);
  assert.equal(new Set(runners).size, runners.length, 'a runner per platform (a Node SEA is made from that platform’s node)');
  checkRuns(pkg.steps!, 'release.yml package');
  const rel = release.jobs!.release!;
  assert.equal(rel.needs, 'package');
  const runs = rel.steps!.map((s) => s.run ?? '').join('\n');
  assert.match(runs, /node scripts\/krew-manifest\.mjs[^\n]*\\\n[\s\S]*--out plugins\/proxyout\.yaml dist\/pkg\/\*\.tar\.gz/);
  assert.match(runs, /gh release create/);
  checkRuns(rel.steps!, 'release.yml release');
});
