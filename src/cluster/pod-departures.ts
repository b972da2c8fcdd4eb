// Which pod instances EndpointSlice updates say are gone, without a pod watch. The endpoint
// controller drops a pod from its Service's slices when the pod object is deleted (after listing it
// as terminating for its grace period), and also when the Service stops selecting it (relabelled,
// a new selector): that pod runs on, and so must the streams to it. A pod that left while not
// terminating is gone only once another instance shows up under its name (a force delete).
import type { SlimSlice } from './slim.js';

/** Pods that left quietly, remembered at most (oldest forgotten first). */
const QUIET_MAX = 1_000;

export class PodDepartures {
  /** "namespace/name" → the uid of the instance that left every slice while not terminating. */
  private readonly quiet = new Map<string, string>();

  constructor(private readonly gone: (namespace: string, name: string, uid: string) => void) {}

  /** The instance left every slice; `replaced`: a slice of its Service lists another one under its name. */
  left(namespace: string, name: string, uid: string, terminating: boolean, replaced: boolean): void {
    if (terminating || replaced) return this.gone(namespace, name, uid);
    const k = `${namespace}/${name}`;
    this.quiet.delete(k);
    this.quiet.set(k, uid);
    if (this.quiet.size > QUIET_MAX) this.quiet.delete(this.quiet.keys().next().value!);
  }

  /** A slice as it is now: an instance under the name of one that left quietly means that one is gone. */
  listed(slice: SlimSlice): void {
    if (this.quiet.size === 0) return;
    for (const ep of slice.endpoints) {
      if (ep.refKind !== 'Pod' || !ep.refName || !ep.refUid) continue;
      const namespace = ep.refNamespace ?? slice.namespace;
      const k = `${namespace}/${ep.refName}`;
      const uid = this.quiet.get(k);
      if (uid === undefined) continue;
      this.quiet.delete(k);
      if (uid !== ep.refUid) this.gone(namespace, ep.refName, uid);
    }
  }
}
