import type { KubeConfig, V1EndpointSlice, V1Pod, V1Service } from '@kubernetes/client-node';
import type { Logger } from '../core/log.js';
import type { ApiConnection } from './api.js';
import { ResilientInformer } from './informer.js';
import type { ClusterIndex } from './index.js';

/** Informers for one scope: the whole cluster, or one namespace when RBAC allows no more. */
export class WatchSet {
  readonly services: ResilientInformer<V1Service>;
  readonly slices: ResilientInformer<V1EndpointSlice>;
  readonly pods: ResilientInformer<V1Pod>;

  constructor(kc: KubeConfig, api: ApiConnection, log: Logger, readonly namespace: string | undefined, index: ClusterIndex) {
    const core = namespace ? `/api/v1/namespaces/${encodeURIComponent(namespace)}` : '/api/v1';
    const disc = namespace ? `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}` : '/apis/discovery.k8s.io/v1';
    this.services = new ResilientInformer<V1Service>(kc, api, `${core}/services`, log, (e, o) => index.apply('services', e, o));
    this.slices = new ResilientInformer<V1EndpointSlice>(kc, api, `${disc}/endpointslices`, log, (e, o) => index.apply('slices', e, o));
    // Only running pods can be dialled (Pod IPs, named target ports): finished Job pods, often
    // most of a busy cluster's pods, are not kept. The API server sends DELETED when a watched pod
    // stops matching the selector.
    this.pods = new ResilientInformer<V1Pod>(kc, api, `${core}/pods?fieldSelector=${encodeURIComponent('status.phase=Running')}`, log, (e, o) => index.apply('pods', e, o));
  }

  all(): ResilientInformer<any>[] {
    return [this.services, this.slices, this.pods];
  }

  async start(): Promise<void> {
    const results = await Promise.allSettled(this.all().map((i) => i.start()));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      await this.stop();
      throw failed.reason;
    }
  }

  stop(): Promise<void> {
    return Promise.all(this.all().map((i) => i.stop())).then(() => undefined);
  }
}
