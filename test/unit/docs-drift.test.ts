// Users copy command lines, config examples and sample output from the docs: these fail when the
// docs name a flag a command does not take, state a default the CLI does not have, link to a file
// or section that is not there, show ready lines the proxy no longer prints, or leave out a config
// key, an ingress controller or a failure reason the code has.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readyLines } from '../../src/cli/ready.js';
import { parseConfig } from '../../src/config/validate.js';
import * as proxyErrors from '../../src/core/errors.js';
import type { ProxyError } from '../../src/core/errors.js';
import { KNOWN_INGRESS_CONTROLLERS } from '../../src/routes/cluster/ingress-controller.js';

// Tests run from dist/test/unit, so the package root is three levels up.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const USER_DOCS = ['README.md', 'docs/usage.md', 'docs/troubleshooting.md', 'docs/security.md'];
const read = (file: string): string => readFileSync(path.join(ROOT, file), 'utf8');

interface ManifestFlag {
  char?: string;
  allowNo?: boolean;
  aliases?: string[];
  default?: unknown;
}
const manifest = JSON.parse(read('oclif.manifest.json')) as { commands: Record<string, { flags: Record<string, ManifestFlag> }> };

/** Every spelling a command accepts: --name, -c, --no-name, deprecated aliases. */
function spellings(command: string): Set<string> {
  const out = new Set(['--help', '-h']);
  for (const [name, f] of Object.entries(manifest.commands[command]!.flags)) {
    out.add(`--${name}`);
    if (f.char) out.add(`-${f.char}`);
    if (f.allowNo) out.add(`--no-${name}`);
    for (const a of f.aliases ?? []) out.add(`--${a}`);
  }
  return out;
}

test('every flag on a documented `kubectl proxyout …` line is one that command takes', () => {
  const wrong: string[] = [];
  let checked = 0;
  for (const file of USER_DOCS) {
    read(file)
      .split('\n')
      .forEach((line, i) => {
        // A command line runs to the end of its code span, a comment, a pipe or a shell operator.
        for (const m of line.matchAll(/\b(?:kubectl|oc)[ -]proxyout((?: +[^ `|;&#)]+)*)/g)) {
          const words = m[1]!.trim().split(/ +/).filter(Boolean);
          const command = words[0] !== undefined && words[0] in manifest.commands ? words.shift()! : 'serve';
          const known = spellings(command);
          for (const word of words) {
            if (word === '--') break; // exec: CMD's own arguments follow
            const flag = word.split('=')[0]!;
            if (!flag.startsWith('-') || flag === '-') continue;
            checked++;
            if (!known.has(flag)) wrong.push(`${file}:${i + 1}: ${command} has no ${flag}: ${line.trim()}`);
          }
        }
      });
  }
  assert.ok(checked > 50, `only ${checked} flags found: the pattern no longer matches the docs`);
  assert.deepEqual(wrong, []);
});

test('the flag table of docs/usage.md has every flag of the foreground proxy, with its default', () => {
  const flags = manifest.commands['serve']!.flags;
  const named = new Set([...read('docs/usage.md').matchAll(/^\| `(?:-[a-z], )?--([a-z-]+)/gm)].map((m) => m[1]!));
  assert.deepEqual(
    Object.keys(flags).filter((f) => !named.has(f)),
    [],
    'flags without a row in the table',
  );
  const rows = [...read('docs/usage.md').matchAll(/^\| `--([a-z-]+)[^`]*`(?: \/ `[^`]*`)? \| `([^`]+)` \|/gm)];
  assert.ok(rows.length > 10, `only ${rows.length} rows with a default found`);
  for (const [, name, stated] of rows) {
    assert.ok(name! in flags, `--${name} is in the flag table but not a flag`);
    assert.equal(stated, String(flags[name!]!.default), `--${name}`);
  }
});

/** GitHub's anchor for a heading, numbered as GitHub numbers repeats; explicit <a id> too. */
function anchors(file: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of read(file).split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    if (fenced) continue;
    for (const m of line.matchAll(/<a id="([^"]+)">/g)) out.add(m[1]!);
    const heading = /^#+ (.*)/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = heading
      .replace(/[`*]/g, '')
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

test('every relative link in the docs reaches a file, and a section of it that exists', () => {
  const broken: string[] = [];
  for (const file of [...USER_DOCS, 'docs/architecture.md', 'docs/performance.md', 'docs/simulated-cluster.md', 'docs/real-cluster.md']) {
    for (const [, target] of read(file).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target!)) continue; // https:, mailto:
      const [rel, anchor] = target!.split('#') as [string, string | undefined];
      const linked = rel === '' ? file : path.join(path.dirname(file), rel);
      if (!existsSync(path.join(ROOT, linked))) broken.push(`${file}: ${target} (no such file)`);
      else if (anchor && linked.endsWith('.md') && !anchors(linked).has(anchor)) broken.push(`${file}: ${target} (no such section)`);
    }
  }
  assert.deepEqual(broken, []);
});

/** The lines under `$ COMMAND` in the first console block of docs/usage.md that runs it. */
function sample(command: string): string[] {
  const usage = read('docs/usage.md');
  const start = usage.indexOf(`\`\`\`console\n$ ${command}\n`);
  assert.ok(start >= 0, `the sample of ${command} is gone from docs/usage.md`);
  const body = usage.slice(start, usage.indexOf('```\n', start + 10)).split('\n');
  return body.slice(2).filter((l) => l !== '');
}

/** readyLines() for a proxy on prod/shop whose API server is api.prod.example.com, no NO_PROXY inherited. */
function printed(view: Omit<Parameters<typeof readyLines>[0], 'context' | 'namespace' | 'apiServers'>): string[] {
  const saved = { NO_PROXY: process.env.NO_PROXY, no_proxy: process.env.no_proxy };
  delete process.env.NO_PROXY;
  delete process.env.no_proxy;
  try {
    return readyLines({ context: 'prod', namespace: 'shop', apiServers: ['https://api.prod.example.com:6443'], ...view });
  } finally {
    for (const [k, v] of Object.entries(saved)) if (v !== undefined) process.env[k] = v;
  }
}

const tcp = (port: number) => ({ address: '127.0.0.1', family: 'IPv4', port });

test("the foreground proxy's sample output in docs/usage.md is what it prints", () => {
  const shown = sample('kubectl proxyout --listen-http 127.0.0.1:3128');
  // A foreground proxy with an HTTP listener on TCP serves its live page there (proxy/live.ts).
  const pageUrl = /live page at (\S+)/.exec(shown.join('\n'))?.[1] ?? 'http://127.0.0.1:3128/?token=T';
  assert.deepEqual(shown, printed({ socks: tcp(1080), http: tcp(3128), pageUrl }));
});

test('the port mappings sample in docs/usage.md is what the proxy prints', () => {
  const shown = sample('kubectl proxyout --forward 5432=db.shop:5432 --forward 0=redis.cache:6379');
  const redis = Number(/port 127\.0\.0\.1:(\d+) → redis/.exec(shown.join('\n'))?.[1] ?? 0);
  const forwards = [
    { address: tcp(5432), target: 'db.shop:5432' },
    { address: tcp(redis), target: 'redis.cache:6379' },
  ];
  assert.deepEqual(shown, printed({ socks: tcp(1080), forwards }));
});

/** The keys the config parser allows where `probe` puts an unknown one, from its refusal. */
function allowedKeys(probe: string): string[] {
  try {
    parseConfig(probe, 'config.yaml', 'cluster.local');
  } catch (err) {
    const allowed = /\(allowed: ([^)]*)\)/.exec((err as Error).message)?.[1];
    if (allowed) return allowed.split(', ');
    throw err;
  }
  throw new Error(`not refused: ${probe}`);
}

test('every config file key the parser takes has its row in the Keys table of docs/usage.md', () => {
  const table = new Set<string>();
  // A row may name siblings after the first key: `routes[].konnectivity.ca`, `.cert`, `.key`.
  for (const [, first, more] of read('docs/usage.md').matchAll(/^\| `([a-z[\].-]+)`((?:, `\.[a-z-]+`)*)/gm)) {
    table.add(first!);
    for (const [, sib] of more!.matchAll(/`\.([a-z-]+)`/g)) table.add(first!.replace(/[^.]+$/, sib!));
  }
  const keys = allowedKeys('zz: 1\n');
  for (const kind of ['cluster', 'direct', 'reject', 'ssh', 'konnectivity']) {
    for (const k of allowedKeys(`routes: [{name: a, kind: ${kind}, zz: 1}]\n`)) keys.push(`routes[].${k}`);
  }
  for (const [sub, kind] of [
    ['ingress', 'cluster'],
    ['ssh', 'ssh'],
    ['konnectivity', 'konnectivity'],
  ]) {
    for (const k of allowedKeys(`routes: [{name: a, kind: ${kind}, ${sub}: {zz: 1}}]\n`)) keys.push(`routes[].${sub}.${k}`);
  }
  // routes[].ssh, .ingress and .konnectivity are documented by their own keys.
  const missing = [...new Set(keys)].filter((k) => !table.has(k) && !['routes[].ssh', 'routes[].ingress', 'routes[].konnectivity'].includes(k));
  assert.deepEqual(missing, []);
});

test('every config file example (```yaml) in the docs is one the proxy takes', () => {
  let examples = 0;
  for (const file of USER_DOCS) {
    for (const [, yaml] of read(file).matchAll(/```yaml\n([\s\S]*?)```/g)) {
      examples++;
      assert.doesNotThrow(() => parseConfig(yaml!, file, 'cluster.local'), `${file}:\n${yaml}`);
    }
  }
  assert.ok(examples >= 3, `only ${examples} examples found`);
});

test('the ingress controller table of docs/usage.md is the list the proxy looks for, in its order', () => {
  const rows = [...read('docs/usage.md').matchAll(/^ *\| `([a-z0-9-]+)\/([a-z0-9-]+)` \| [^|]+ \| `([^`]+)` \|$/gm)];
  assert.deepEqual(
    rows.map(([, namespace, service, controller]) => ({ namespace, service, controller })),
    KNOWN_INGRESS_CONTROLLERS,
  );
});

test('every failure reason has its row in the table of docs/troubleshooting.md, with its SOCKS reply and HTTP status', () => {
  const rows = new Map<string, { socks: string; http: string }>();
  for (const [, socks, http, reason] of read('docs/troubleshooting.md').matchAll(/^\| (0x[0-9a-f]{2}[^|]*|—) \| (\d{3}) \| `([a-z-]+)` \|/gm)) {
    rows.set(reason!, { socks: socks!, http: http! });
  }
  const errors = (Object.values(proxyErrors) as unknown[]).filter(
    (E): E is new (message: string) => ProxyError => typeof E === 'function' && E.prototype instanceof proxyErrors.ProxyError,
  );
  assert.ok(errors.length >= 10, `only ${errors.length} error classes found`);
  const wrong: string[] = [];
  for (const E of errors) {
    const e = new E('x');
    const row = rows.get(e.reason);
    const socks = `0x${e.socksReply.toString(16).padStart(2, '0')}`;
    if (!row) wrong.push(`${e.reason}: no row`);
    else if (row.http !== String(e.httpStatus) || (row.socks !== '—' && !row.socks.startsWith(socks)))
      wrong.push(`${e.reason}: the table says ${row.socks} / ${row.http}, the proxy sends ${socks} / ${e.httpStatus}`);
  }
  assert.deepEqual(wrong, []);
});
