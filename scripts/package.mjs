#!/usr/bin/env node
// `npm run package`: the CLI as one file, then as one executable for this platform.
//   1. esbuild bundles dist/src/entry/bundle-main.js (after `npm run build`) with every dependency
//      into dist/pkg/kubectl-proxyout.cjs (CommonJS: what a Node single executable runs).
//   2. Node's single executable applications (https://nodejs.org/api/single-executable-applications.html):
//      a preparation blob from sea-config, injected with postject into a copy of this node binary
//      → dist/pkg/kubectl-proxyout-<os>-<arch>[.exe] (macOS: signature removed, then ad-hoc signed).
//   3. dist/pkg/kubectl-proxyout-<os>-<arch>.tar.gz with the binary (named kubectl-proxyout), its completion
//      script for kubectl (kubectl_complete-proxyout), LICENSE and README.md.
// `--bundle-only` stops after step 1.
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { copyFileSync, chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = path.join(root, 'dist', 'pkg');
const pjson = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
const goos = { linux: 'linux', darwin: 'darwin', win32: 'windows' }[process.platform] ?? process.platform;
const goarch = { x64: 'amd64', arm64: 'arm64' }[process.arch] ?? process.arch;
const exe = process.platform === 'win32' ? '.exe' : '';
const name = `kubectl-proxyout-${goos}-${goarch}`;

mkdirSync(out, { recursive: true });
const bundle = path.join(out, 'kubectl-proxyout.cjs');

await build({
  entryPoints: [path.join(root, 'dist', 'src', 'entry', 'bundle-main.js')],
  outfile: bundle,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: 'none',
  define: {
    'import.meta.url': '__proxyout_import_meta_url',
    'process.env.PROXYOUT_BUNDLE': '"1"',
    __PROXYOUT_PJSON__: JSON.stringify({ name: pjson.name, version: pjson.version, description: pjson.description, oclif: pjson.oclif }),
    __PROXYOUT_MANIFEST__: readFileSync(path.join(root, 'oclif.manifest.json'), 'utf8'),
  },
  // import.meta.url for our modules (self.ts, main.ts): the bundle's own file. oclif's engine
  // check requires its package.json from disk, which a single executable has not: it is off (the
  // Node version is the one built in).
  banner: {
    js:
      "var __proxyout_import_meta_url = require('node:url').pathToFileURL(__filename).href; process.env.OCLIF_DISABLE_ENGINE_WARNING = process.env.OCLIF_DISABLE_ENGINE_WARNING || 'true';" +
      // No HOME and no passwd entry: HOME=/ before any module calls os.homedir() (bin/kubectl-proxyout homeOrRoot).
      " if (process.platform !== 'win32') try { require('node:os').homedir(); } catch { process.env.HOME = '/'; }" +
      // libuv's threadpool at 16 threads, the variable taken back (bin/kubectl-proxyout sizeThreadpool),
      // for the single executable and a bundle run on its own; under the bin script, it has done so.
      " if (process.platform !== 'win32' && globalThis.__proxyoutThreadpool === undefined && process.env.UV_THREADPOOL_SIZE === undefined && require.main === module &&" +
      " !/(^|\\s)[\"']?(--import|--require|-r|--loader|--experimental-loader)([\"']|\\s|=|$)/.test([...process.execArgv, process.env.NODE_OPTIONS || ''].join(' '))) {" +
      " process.env.UV_THREADPOOL_SIZE = '16'; require('node:fs').stat(__filename, () => {}); delete process.env.UV_THREADPOOL_SIZE; globalThis.__proxyoutThreadpool = 16; }",
  },
  plugins: [
    {
      // Optional modules their users try to require and do without (ws's native speed-ups,
      // node-fetch's encoding): a module that throws, as when they are not installed. Left
      // external, a single executable would warn that it cannot require them.
      name: 'absent-optional',
      // ssh2's native crypto and cpu-features are optional the same way (ssh2 falls back to
      // JavaScript crypto when they do not load).
      setup(b) {
        b.onResolve({ filter: /^(bufferutil|utf-8-validate|encoding|cpu-features)$|\.node$/ }, (args) => ({ path: args.path, namespace: 'absent' }));
        b.onLoad({ filter: /.*/, namespace: 'absent' }, (args) => ({ contents: `throw new Error('${args.path} is not bundled');`, loader: 'js' }));
      },
    },
    {
      // node-fetch's URL parser (tr46) requires Node's built-in punycode, deprecated at run time
      // since Node 21: outside node_modules (as in the bundle) every start printed DEP0040 to
      // stderr. The npm package of the same code (punycode.js, the one Node ships) takes its place.
      name: 'punycode-userland',
      setup(b) {
        b.onResolve({ filter: /^(node:)?punycode$/ }, () => ({ path: path.join(root, 'node_modules', 'punycode', 'punycode.js') }));
      },
    },
    {
      // KubeConfig (client-node config.js) needs two names from the generated API package; the
      // rest of it (every model and API class) is never used here and costs ~60 MiB per process.
      name: 'client-node-gen-slim',
      setup(b) {
        b.onResolve({ filter: /^\.\/gen\/index\.js$/ }, (args) =>
          /@kubernetes[\\/]client-node[\\/]dist[\\/]config\.js$/.test(args.importer)
            ? { path: path.join(root, 'scripts', 'client-node-gen-slim.mjs') }
            : undefined,
        );
      },
    },
    {
      // oclif reads its manifest with util/fs readJson; the bundle's is built in (bundle-main.ts).
      name: 'oclif-manifest-in-memory',
      setup(b) {
        b.onResolve({ filter: /^\.\.\/util\/fs$/ }, (args) =>
          /@oclif[\\/]core[\\/]lib[\\/]config[\\/]/.test(args.importer)
            ? { path: path.join(path.dirname(args.importer), '..', 'util', 'fs.js'), namespace: 'oclif-fs' }
            : undefined,
        );
        b.onLoad({ filter: /.*/, namespace: 'oclif-fs' }, (args) => ({
          loader: 'js',
          resolveDir: path.dirname(args.path),
          contents: `const real = require(${JSON.stringify(args.path)});
module.exports = { ...real, readJson: async (p, useCache) => (/oclif\\.manifest\\.json$/.test(p) ? globalThis.__proxyoutManifest : real.readJson(p, useCache)) };`,
        }));
      },
    },
    {
      name: 'oclif-module-loader',
      setup(b) {
        b.onResolve({ filter: /module-loader$/ }, (args) =>
          args.importer.includes(`${path.sep}@oclif${path.sep}core${path.sep}`) ? { path: path.join(root, 'scripts', 'oclif-module-loader.cjs') } : undefined,
        );
      },
    },
  ],
  logLevel: 'warning',
});
// esbuild escapes non-ASCII characters except in regular expression literals (ansi-regex has a
// raw U+009B there). Escaped too, the bundle is pure ASCII, which the bin script relies on: it
// reads the file as latin1, three times faster than decoding UTF-8 (bin/kubectl-proxyout).
// A \uXXXX escape means the same character in strings, templates, identifiers and regular
// expressions — except after a backslash (`/\é/`), in String.raw or a tagged template's raw text,
// and for characters beyond U+FFFF; the build stops on the first two kinds it can see rather than
// change the program's meaning.
{
  const text = readFileSync(bundle, 'utf8');
  for (const m of text.matchAll(/(\\?)([^\x00-\x7f])/gu)) {
    const where = text.slice(Math.max(0, m.index - 40), m.index + 10).replace(/\s+/g, ' ');
    if (m[1] || m[2].codePointAt(0) > 0xffff) throw new Error(`bundle: cannot escape U+${m[2].codePointAt(0).toString(16)} safely near: ${where}`);
  }
  const ascii = text.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  if (ascii !== text) writeFileSync(bundle, ascii);
}
console.log(`bundle: ${path.relative(root, bundle)} (${(statSync(bundle).size / 1048576).toFixed(1)} MiB)`);
if (process.argv.includes('--bundle-only')) process.exit(0);

// Single executable: blob, copy of node, inject, (re)sign.
const blob = path.join(out, 'sea-prep.blob');
const seaConfig = path.join(out, 'sea-config.json');
writeFileSync(seaConfig, JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true, useCodeCache: true, useSnapshot: false }));
execFileSync(process.execPath, ['--experimental-sea-config', seaConfig], { stdio: 'inherit' });
const binary = path.join(out, name + exe);
rmSync(binary, { force: true });
copyFileSync(process.execPath, binary);
chmodSync(binary, 0o755);
if (process.platform === 'darwin') execFileSync('codesign', ['--remove-signature', binary], { stdio: 'inherit' });
const postject = path.join(root, 'node_modules', 'postject', 'dist', 'cli.js');
execFileSync(
  process.execPath,
  [
    postject,
    binary,
    'NODE_SEA_BLOB',
    blob,
    '--sentinel-fuse',
    'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2',
    ...(process.platform === 'darwin' ? ['--macho-segment-name', 'NODE_SEA'] : []),
  ],
  { stdio: 'inherit' },
);
if (process.platform === 'darwin') execFileSync('codesign', ['--sign', '-', binary], { stdio: 'inherit' });
rmSync(blob);
rmSync(seaConfig);
console.log(`binary: ${path.relative(root, binary)} (${(statSync(binary).size / 1048576).toFixed(1)} MiB)`);

// The archive krew and the release page use: kubectl-proxyout[.exe], its completer, LICENSE, README.md at its top.
const stage = path.join(out, `stage-${name}`);
rmSync(stage, { recursive: true, force: true });
mkdirSync(stage);
copyFileSync(binary, path.join(stage, `kubectl-proxyout${exe}`));
chmodSync(path.join(stage, `kubectl-proxyout${exe}`), 0o755);
copyFileSync(path.join(root, 'LICENSE'), path.join(stage, 'LICENSE'));
copyFileSync(path.join(root, 'README.md'), path.join(stage, 'README.md'));
// What kubectl (>= 1.26) runs from PATH to complete `kubectl proxyout ...` (src/cli/complete.ts).
const completer = process.platform === 'win32' ? 'kubectl_complete-proxyout.cmd' : 'kubectl_complete-proxyout';
const completerText =
  process.platform === 'win32'
    ? '@"%~dp0kubectl-proxyout.exe" __complete %*\r\n'
    : '#!/bin/sh\n# kubectl (>= 1.26) runs this for `kubectl proxyout ...<TAB>`: keep it beside kubectl-proxyout.\nexec "${0%/*}/kubectl-proxyout" __complete "$@"\n';
writeFileSync(path.join(stage, completer), completerText, { mode: 0o755 });
const archive = path.join(out, `${name}.tar.gz`);
execFileSync('tar', ['-czf', archive, '-C', stage, `kubectl-proxyout${exe}`, completer, 'LICENSE', 'README.md'], { stdio: 'inherit' });
rmSync(stage, { recursive: true, force: true });
console.log(`archive: ${path.relative(root, archive)} (${(statSync(archive).size / 1048576).toFixed(1)} MiB)`);
