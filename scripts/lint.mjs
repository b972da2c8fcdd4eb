#!/usr/bin/env node
// House rules tsc cannot check (no lint dependency on purpose). Run from `npm run lint`.
//  - src files stay under MAX_LINES, so modules stay reviewable;
//  - stdout belongs to commands: console.log elsewhere in src would corrupt command output
//    (e.g. the `export ALL_PROXY=…` lines users paste); libraries log through pino on stderr;
//  - a committed `.only(` would silently skip the rest of the suite;
//  - a src/ folder imports only from its own layer and the layers below it (LAYERS), type-only
//    imports included, and only entry/, commands/ and cli/ import oclif: a request walks strictly down.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAX_LINES = 400;
const STDOUT_ALLOWED = ['src/commands/', 'src/cli/'];
const SOURCE = /\.(?:[cm]?[jt]s|tsx)$/;
/** src/'s folders, top first; folders in one row are peers (docs/architecture.md, "Layers"). */
const LAYERS = [
  ['entry'],
  ['commands'],
  ['service', 'doctor'],
  ['cli'],
  ['managed'],
  ['proxy'],
  ['ui'],
  ['state'],
  ['listeners'],
  ['config'],
  ['routing'],
  ['routes'],
  ['ssh', 'konnectivity'],
  ['tunnel'],
  ['cluster'],
  ['auth'],
  ['core'],
];
const OCLIF_ALLOWED = ['entry', 'commands', 'cli'];
const layerOf = new Map(LAYERS.flatMap((row, i) => row.map((folder) => [folder, i])));
const IMPORT = /(?:^|[\s;])(?:import|export)\s(?:[^'";]*?\sfrom\s)?'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/g;

/** Problems with the imports of one src/ file: upward ones, oclif outside the command layers, unknown folders. */
function layerProblems(file, text) {
  const folder = file.split('/')[1];
  if (!folder.endsWith('.ts') && !layerOf.has(folder)) return [`${file}: folder src/${folder} is in no layer; add it to LAYERS in scripts/lint.mjs`];
  const out = [];
  for (const { line, n } of codeLines(text)) {
    for (const m of line.matchAll(IMPORT)) {
      const spec = m[1] ?? m[2];
      if (spec.startsWith('@oclif/') && !OCLIF_ALLOWED.includes(folder))
        out.push(`${file}:${n}: imports ${spec}; only src/${OCLIF_ALLOWED.join(' and src/')} may`);
      if (!spec.startsWith('.') || folder.endsWith('.ts')) continue;
      const target = normalize(join(dirname(file), spec)).split(sep);
      const to = target.length > 2 && target[0] === 'src' ? target[1] : undefined;
      if (!to || to === folder || !layerOf.has(to)) continue;
      if (layerOf.get(to) < layerOf.get(folder)) out.push(`${file}:${n}: imports ${spec}: src/${to} is a layer above src/${folder}`);
    }
  }
  return out;
}

function* walk(dir) {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch (err) {
    if (err.code === 'ENOENT') return;
    throw err;
  }
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else if (SOURCE.test(entry.name)) yield relative(ROOT, path).split(sep).join('/');
  }
}

/** Lines with their 1-based numbers, skipping whole-line comments (prose may mention these). */
function codeLines(text) {
  return text
    .split('\n')
    .map((line, i) => ({ line, n: i + 1 }))
    .filter(({ line }) => !/^\s*(\/\/|\*|\/\*)/.test(line));
}

const problems = [];
let checked = 0;

for (const file of walk(join(ROOT, 'src'))) {
  checked++;
  const text = readFileSync(join(ROOT, file), 'utf8');
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  if (lines > MAX_LINES) problems.push(`${file}: ${lines} lines (max ${MAX_LINES}); split it`);
  problems.push(...layerProblems(file, text));
  if (!STDOUT_ALLOWED.some((dir) => file.startsWith(dir))) {
    for (const { line, n } of codeLines(text)) {
      if (/\bconsole\.log\s*\(/.test(line)) problems.push(`${file}:${n}: console.log outside src/commands and src/cli; use the logger`);
    }
  }
}

for (const file of walk(join(ROOT, 'test'))) {
  checked++;
  for (const { line, n } of codeLines(readFileSync(join(ROOT, file), 'utf8'))) {
    if (/\.only\s*\(/.test(line)) problems.push(`${file}:${n}: .only( left in a test`);
  }
}

for (const problem of problems) console.error(problem);
if (problems.length > 0) {
  console.error(`lint: ${problems.length} problem(s) in ${checked} files`);
  process.exit(1);
}
console.log(`lint: ${checked} files ok`);
