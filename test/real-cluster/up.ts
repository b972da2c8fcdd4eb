// Starts a real-cluster test bed by hand and keeps it up until Ctrl-C:
//   bash test/real-cluster/build.sh && npm run build && node dist/test/real-cluster/up.js [node-1,node-2]
//     [--version=v1.34] [--apiserver-flag=--feature-gates=PortForwardWebsockets=false,WatchList=false] [--node-flag=--websocket-tunnel=false]
// Prints the kubeconfig to use (contexts admin, limited, cert) and where the components' logs are.
import { CONTROL_PLANES, startRealCluster, type ControlPlaneVersion } from '../helpers/real-cluster.js';

const args = process.argv.slice(2);
const flagsOf = (name: string) => args.filter((a) => a.startsWith(`--${name}=`)).map((a) => a.slice(name.length + 3));
const nodes = args.find((a) => !a.startsWith('--'))?.split(',').filter(Boolean);
const version = (flagsOf('version').pop() ?? 'v1.37') as ControlPlaneVersion;
if (!(version in CONTROL_PLANES)) throw new Error(`--version: one of ${Object.keys(CONTROL_PLANES).join(', ')}`);
const cluster = await startRealCluster({
  version,
  nodes,
  apiServerFlags: flagsOf('apiserver-flag'),
  nodeFlags: flagsOf('node-flag'),
  keep: true,
  progress: (line) => console.error(line),
});
console.log(`export KUBECONFIG=${cluster.kubeconfig}`);
console.log(`# ${cluster.kubernetesVersion} at ${cluster.server}; contexts admin (current), limited (namespace ${cluster.limitedNamespace}), cert`);
console.log(`# started in ${cluster.startupMs} ms; logs in ${cluster.dir}; Ctrl-C stops it`);
const stop = async () => {
  await cluster.stop();
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
