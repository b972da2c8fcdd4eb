// Starts a real-cluster test bed by hand and keeps it up until Ctrl-C:
//   bash test/real-cluster/build.sh && npm run build && node dist/test/real-cluster/up.js [node-1,node-2]
//     [--version=v1.34] [--dual-stack=IPv4|IPv6] [--ipv6-api] [--apiserver-flag=--feature-gates=PortForwardWebsockets=false,WatchList=false] [--node-flag=--websocket-tunnel=false]
//     [--jwt-issuer]
// Prints the kubeconfig to use (contexts admin, limited, cert) and where the components' logs are.
// --jwt-issuer: a local OIDC issuer whose tokens the API server takes (user oidc:alice@example.com,
// cluster-admin), and a `jwt` context whose exec plugin fetches 20 s tokens from it with curl.
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import yaml from 'js-yaml';
import { CONTROL_PLANES, startRealCluster, type ControlPlaneVersion } from '../helpers/real-cluster.js';
import { startOidcIssuer } from '../helpers/oidc-issuer.js';
import { jwtAuthenticationConfig, jwtUserBinding } from '../helpers/real-cluster-jwt.js';

const args = process.argv.slice(2);
const flagsOf = (name: string) => args.filter((a) => a.startsWith(`--${name}=`)).map((a) => a.slice(name.length + 3));
const nodes = args.find((a) => !a.startsWith('--'))?.split(',').filter(Boolean);
const version = (flagsOf('version').pop() ?? 'v1.37') as ControlPlaneVersion;
if (!(version in CONTROL_PLANES)) throw new Error(`--version: one of ${Object.keys(CONTROL_PLANES).join(', ')}`);
const issuer = args.includes('--jwt-issuer') ? await startOidcIssuer({ refreshToken: 'rt-1', ttlSeconds: 20 }) : undefined;
const dualStack = flagsOf('dual-stack').pop() as 'IPv4' | 'IPv6' | undefined;
if (dualStack && dualStack !== 'IPv4' && dualStack !== 'IPv6') throw new Error('--dual-stack: IPv4 or IPv6 (the primary family)');
const cluster = await startRealCluster({
  version,
  dualStack,
  apiServerHost: args.includes('--ipv6-api') ? '::1' : undefined,
  nodes,
  apiServerFlags: flagsOf('apiserver-flag'),
  nodeFlags: flagsOf('node-flag'),
  ...(issuer ? { authenticationConfig: jwtAuthenticationConfig(issuer) } : {}),
  keep: true,
  progress: (line) => console.error(line),
});
if (issuer) {
  const ca = path.join(cluster.dir, 'issuer-ca.pem');
  await writeFile(ca, issuer.caPem);
  await cluster.kubectl(['apply', '-f', '-'], { input: jwtUserBinding('alice@example.com') });
  const plugin = path.join(cluster.dir, 'jwt-plugin.sh');
  await writeFile(plugin, `#!/bin/sh\nexec curl -sf --cacert '${ca}' "${issuer.url}/exec-credential?ttl=\${TTL:-20}"\n`, { mode: 0o755 });
  // Written here: `kubectl config set-credentials` would make the command relative to the kubeconfig (a PATH look-up).
  const doc = yaml.load(await readFile(cluster.kubeconfig, 'utf8')) as { users: object[]; contexts: object[] };
  doc.users.push({ name: 'jwt', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: plugin, interactiveMode: 'Never' } } });
  doc.contexts.push({ name: 'jwt', context: { cluster: 'real', user: 'jwt', namespace: 'default' } });
  await writeFile(cluster.kubeconfig, yaml.dump(doc), { mode: 0o600 });
  console.log(`# JWT issuer ${issuer.url} (CA ${ca}); context jwt: an exec plugin with 20 s tokens (TTL=S in its environment for others)`);
}
console.log(`export KUBECONFIG=${cluster.kubeconfig}`);
console.log(`# ${cluster.kubernetesVersion} at ${cluster.server}; contexts admin (current), limited (namespace ${cluster.limitedNamespace}), cert`);
console.log(`# started in ${cluster.startupMs} ms; logs in ${cluster.dir}; Ctrl-C stops it`);
const stop = async () => {
  await cluster.stop();
  await issuer?.close();
  process.exit(0);
};
process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());
setInterval(() => {
  try {
    cluster.assertHealthy();
  } catch (err) {
    console.error(String(err));
    void cluster.stop().then(() => process.exit(1));
  }
}, 1000);
