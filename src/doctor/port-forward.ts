// The port-forward check: which protocols the API server offers, asked for a running pod. A pod
// whose kubelet fails it (one left on a node that went away still says Running; its kubelet
// answers 404 `pod does not exist`, or the API server cannot reach it) says nothing of the API
// server: the next pod is asked, as the proxy would send a new stream elsewhere.
import type { ApiConnection } from '../cluster/api.js';
import { PROTOCOL_LABELS, probeProtocols, type ProtocolAnswer } from './protocols.js';
import type { Check } from './report.js';

/** Pods asked at most, each costing a probe of every protocol. */
const MAX_PODS = 3;

interface PodList {
  items?: Array<{
    metadata?: { name?: string; namespace?: string; deletionTimestamp?: string };
    spec?: { hostNetwork?: boolean; containers?: Array<{ ports?: Array<{ containerPort?: number }> }> };
    status?: { phase?: string; conditions?: Array<{ type?: string; status?: string }> };
  }>;
}
type Pod = NonNullable<PodList['items']>[number];
interface ProbePod {
  namespace: string;
  name: string;
  port: number;
}

/** Pods to ask about protocols (at most MAX_PODS): in the route's namespace, else anywhere visible. */
async function findPods(api: ApiConnection, namespace: string, timeoutMs: number): Promise<ProbePod[]> {
  // Asked of the API server: a page of evicted or finished pods, or of a big cluster's
  // host-network DaemonSet pods (a CNI's, kube-proxy), hid the rest.
  const query = `?fieldSelector=${encodeURIComponent('status.phase=Running,spec.hostNetwork=false')}&limit=100`;
  for (const path of [`/api/v1/namespaces/${encodeURIComponent(namespace)}/pods${query}`, `/api/v1/pods${query}`]) {
    let list: PodList;
    try {
      list = await api.getJson<PodList>(path, timeoutMs);
    } catch {
      continue;
    }
    const running = (list.items ?? []).filter((p) => p.status?.phase === 'Running' && !p.spec?.hostNetwork && p.metadata?.name);
    // Ready pods not being deleted first: the kubelet vouches for them now.
    const rank = (p: Pod) => (p.metadata?.deletionTimestamp ? 2 : 0) + (p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? 0 : 1);
    const ranked = running.map((p, i) => ({ p, i })).sort((a, b) => rank(a.p) - rank(b.p) || a.i - b.i);
    if (ranked.length === 0) continue;
    return ranked.slice(0, MAX_PODS).map(({ p }) => ({
      namespace: p.metadata!.namespace ?? namespace,
      name: p.metadata!.name!,
      port: p.spec?.containers?.flatMap((c) => c.ports ?? []).find((x) => x.containerPort)?.containerPort ?? 80,
    }));
  }
  return [];
}

/** Every protocol refused for a reason of the pod's (its kubelet's 404, the API server failing to reach it). */
const podRefused = (answers: ProtocolAnswer[]) => answers.every((a) => !a.offered && (a.status === 404 || a.status >= 500));

export async function checkProtocols(api: ApiConnection, namespace: string, o: { scope: string; timeoutMs: number }): Promise<Check> {
  const base = { scope: o.scope, name: 'port-forward' };
  const pods = await findPods(api, namespace, o.timeoutMs);
  if (pods.length === 0)
    return { ...base, status: 'skip', detail: `no running pod visible (namespace ${namespace}, then cluster-wide): the protocols were not probed` };
  const passedOver: string[] = [];
  let pod = pods[0]!;
  let answers = await probeProtocols(api, pod, o.timeoutMs);
  for (const next of pods.slice(1)) {
    if (!podRefused(answers)) break;
    passedOver.push(`${pod.namespace}/${pod.name} (${answers[0]!.answer})`);
    pod = next;
    answers = await probeProtocols(api, pod, o.timeoutMs);
  }
  const summary = answers.map((a) => `${PROTOCOL_LABELS[a.protocol]}: ${a.offered ? 'yes' : `no (${a.answer})`}`).join('; ');
  const detail = `pod ${pod.namespace}/${pod.name}: ${summary}${passedOver.length ? `; passed over, refused for the pod's own reason: ${passedOver.join(', ')}` : ''}`;
  const usable = answers.some((a) => a.offered && a.protocol !== 'spdy');
  if (usable) return { ...base, status: 'ok', detail };
  const denied = answers.find((a) => a.status === 401 || a.status === 403);
  return {
    ...base,
    status: 'fail',
    detail,
    fix: denied
      ? 'port-forward to this pod is refused: see the rbac check (get on pods/portforward, and create from Kubernetes 1.35)'
      : podRefused(answers)
        ? 'every pod asked was refused with 404 or 5xx: pods their kubelet no longer has, or nodes the API server cannot reach (check `kubectl get nodes` and where those pods run); else a proxy or load balancer in front of the API server failing WebSocket upgrades'
        : 'the proxy needs the WebSocket port-forward (Kubernetes ≥ 1.30 for the tunnel; any version for v4.channel.k8s.io): a proxy or load balancer in front of the API server may drop WebSocket upgrades',
  };
}
