#!/usr/bin/env node
// Renders the krew plugin manifest (apiVersion krew.googlecontainertools.github.com/v1alpha2,
// https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/) from the archives
// `npm run package` built: one platform per kubectl-proxyout-<os>-<arch>.tar.gz, with its
// download URI, its sha256, the binary inside it and an os/arch selector.
//
//   node scripts/krew-manifest.mjs --base-url https://github.com/O/R/releases/download/v0.1.0 \
//        [--version v0.1.0] [--homepage URL] [--out plugins/proxyout.yaml] dist/pkg/*.tar.gz
//   npm run krew-manifest -- --local
//        for what `npm run package` built here: dist/pkg/proxyout.yaml, its URIs file:// URLs of
//        the archives, and the `kubectl krew install --manifest … --archive …` line that installs it.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import yaml from 'js-yaml';

const root = fileURLToPath(new URL('..', import.meta.url));
const pjson = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
const ARCHIVE = /^kubectl-proxyout-(linux|darwin|windows)-(amd64|arm64)\.tar\.gz$/;

export function renderManifest({ version, baseUrl, homepage, archives }) {
  if (!/^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version)) throw new Error(`version ${version}: krew wants semver with a leading "v"`);
  if (archives.length === 0) throw new Error('no archives given');
  const platforms = archives.map((file) => {
    const m = ARCHIVE.exec(path.basename(file));
    if (!m) throw new Error(`${file}: not a kubectl-proxyout-<os>-<arch>.tar.gz archive`);
    const [, os, arch] = m;
    return {
      selector: { matchLabels: { os, arch } },
      uri: `${baseUrl.replace(/\/$/, '')}/${path.basename(file)}`,
      sha256: createHash('sha256').update(readFileSync(file)).digest('hex'),
      bin: os === 'windows' ? 'kubectl-proxyout.exe' : 'kubectl-proxyout',
    };
  });
  platforms.sort((a, b) => a.uri.localeCompare(b.uri));
  const manifest = {
    apiVersion: 'krew.googlecontainertools.github.com/v1alpha2',
    kind: 'Plugin',
    metadata: { name: 'proxyout' },
    spec: {
      version,
      ...(homepage ? { homepage } : {}),
      shortDescription: 'SOCKS5/HTTP proxy into clusters via port-forward',
      description:
        [
          'A local SOCKS5 and HTTP proxy into your Kubernetes clusters. Point curl, a browser or any',
          'proxy-aware tool at it and Service names (web.shop.svc.cluster.local:8080), ClusterIPs and',
          "Pod IPs just work: every TCP stream rides the API server's pod port-forward, so it works",
          'wherever `kubectl port-forward` works — no VPN routes, no admin rights, nothing installed in',
          'the cluster. Uses your kubeconfig as kubectl does.',
        ].join('\n') + '\n',
      caveats:
        [
          'Start a proxy in the foreground (Ctrl-C stops it):',
          '  kubectl proxyout --context CONTEXT',
          '  curl --proxy socks5h://127.0.0.1:1080 http://web.NAMESPACE:8080/',
          'or keep one running in the background:',
          '  kubectl proxyout connect --socks --context CONTEXT',
          'Something wrong? `kubectl proxyout doctor` checks the kubeconfig, the API server,',
          'RBAC (list/watch services, endpointslices, pods; create pods/portforward) and says how to fix it.',
          'Shell completion (kubectl >= 1.26) once: cp ~/.krew/store/proxyout/*/kubectl_complete-proxyout ~/.krew/bin/',
          'Before `kubectl krew uninstall proxyout`, stop what it runs in the background, which outlives it:',
          '  kubectl proxyout quit; kubectl proxyout service-uninstall   (the second if you ran service-install)',
        ].join('\n') + '\n',
      platforms,
    },
  };
  return yaml.dump(manifest, { lineWidth: -1, noRefs: true });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const args = process.argv.slice(2);
  const opt = (name) => {
    const i = args.indexOf(name);
    if (i < 0) return undefined;
    const [, value] = args.splice(i, 2);
    return value;
  };
  const version = opt('--version') ?? `v${pjson.version}`;
  // The archives hold what this checkout's package.json names: a tag that is not its version
  // (a release tagged before the bump) made krew install "v0.2.0" as a plugin that says 0.1.0.
  if (version.replace(/^v/, '') !== pjson.version) {
    console.error(
      `--version ${version}: the archives are of version ${pjson.version} (package.json, what \`kubectl proxyout --version\` says); set package.json's version to ${version.replace(/^v/, '')} first`,
    );
    process.exit(1);
  }
  const local = args.includes('--local');
  if (local) args.splice(args.indexOf('--local'), 1);
  if (local) {
    // krew installs a local archive with --archive; the manifest's uri then only names it.
    const pkg = path.join(root, 'dist', 'pkg');
    const archives = readdirSync(pkg, { withFileTypes: true })
      .filter((e) => e.isFile() && ARCHIVE.test(e.name))
      .map((e) => path.join(pkg, e.name));
    if (archives.length === 0) {
      console.error('no archives in dist/pkg: run `npm run package` first');
      process.exit(1);
    }
    const out = opt('--out') ?? path.join(pkg, 'proxyout.yaml');
    writeFileSync(out, renderManifest({ version, baseUrl: pathToFileURL(pkg).href, homepage: opt('--homepage') ?? pjson.homepage, archives }));
    console.log(`wrote ${out}; install it with:`);
    for (const a of archives) console.log(`  kubectl krew install --manifest=${out} --archive=${a}`);
    process.exit(0);
  }
  const baseUrl = opt('--base-url');
  const homepage = opt('--homepage') ?? pjson.homepage;
  const out = opt('--out');
  if (!baseUrl) {
    console.error(
      'usage: krew-manifest.mjs --base-url URL [--version vX.Y.Z] [--homepage URL] [--out FILE] ARCHIVE…\n       krew-manifest.mjs --local [--version vX.Y.Z] [--out FILE]   (the archives in dist/pkg)',
    );
    process.exit(2);
  }
  const text = renderManifest({ version, baseUrl, homepage, archives: args });
  if (out) writeFileSync(out, text);
  else process.stdout.write(text);
}
