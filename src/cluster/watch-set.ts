import type { Logger } from '../core/log.js';
import type { ApiConnection } from './api.js';
import { ResilientInformer, type InformerHooks, type InformerOptions, type WatchDeadlines, WATCH_DEADLINES } from './informer.js';
import type { ClusterIndex } from './index.js';
import { slimPod, slimService, slimSlice, type SlimPod, type SlimService, type SlimSlice } from './slim.js';

export interface WatchSetOptions extends InformerOptions {
  /**
   * false: Services and EndpointSlices only (bench/big-cluster.ts measures what that saves; the
   * proxy always watches running pods, see docs/architecture.md "Pods are watched").
   */
  watchPods?: boolean;
}

/** Informers for one scope: the whole cluster, or one namespace when RBAC allows no more. */
export class WatchSet {
  readonly services: ResilientInformer<SlimService>;
  readonly slices: ResilientInformer<SlimSlice>;
  readonly pods: ResilientInformer<SlimPod>;
  private readonly watchPods: boolean;

  constructor(
    api: ApiConnection,
    log: Logger,
    readonly namespace: string | undefined,
    index: ClusterIndex,
    deadlines: WatchDeadlines = WATCH_DEADLINES,
    options: WatchSetOptions = {},
    hooks: InformerHooks = {},
  ) {
    const core = namespace ? `/api/v1/namespaces/${encodeURIComponent(namespace)}` : '/api/v1';
    const disc = namespace ? `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}` : '/apis/discovery.k8s.io/v1';
    this.services = new ResilientInformer(api, `${core}/services`, log, (e, o) => index.apply('services', e, o), slimService, deadlines, options, hooks);
    this.slices = new ResilientInformer(api, `${disc}/endpointslices`, log, (e, o) => index.apply('slices', e, o), slimSlice, deadlines, options, hooks);
    // Only running pods can be dialled (Pod IPs, named target ports): finished Job pods, often
    // most of a busy cluster's pods, are not kept. The API server sends DELETED when a watched pod
    // stops matching the selector.
    this.watchPods = options.watchPods !== false;
    this.pods = new ResilientInformer(
      api,
      `${core}/pods?fieldSelector=${encodeURIComponent('status.phase=Running')}`,
      log,
      (e, o) => index.apply('pods', e, o),
      slimPod,
      deadlines,
      options,
      hooks,
    );
  }

  all(): Array<ResilientInformer<SlimService> | ResilientInformer<SlimSlice> | ResilientInformer<SlimPod>> {
    return this.watchPods ? [this.services, this.slices, this.pods] : [this.services, this.slices];
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
