// Which ingress class each learnt host belongs to, and what the cluster's IngressClasses say of
// them, so a cluster with several ingress controllers (public and internal ingress-nginx, nginx
// beside Traefik) sends a host to the controller of its Ingress's class, not to the first found.
// Class of an Ingress: spec.ingressClassName, else the legacy kubernetes.io/ingress.class
// annotation, else none (the IngressClass annotated ingressclass.kubernetes.io/is-default-class).

export const INGRESS_CLASS_PATH = '/apis/networking.k8s.io/v1/ingressclasses';
export const LEGACY_CLASS_ANNOTATION = 'kubernetes.io/ingress.class';
export const DEFAULT_CLASS_ANNOTATION = 'ingressclass.kubernetes.io/is-default-class';
/** The class key of an OpenShift Route's hosts (not a valid class name: it has a space). */
export const ROUTE_CLASS = ' openshift-route';
/** The controller value of OpenShift's router (its IngressClass "openshift-default"). */
export const OPENSHIFT_ROUTER_CONTROLLER = 'openshift.io/ingress-to-route';

/** The hosts one Ingress or Route names, with its class ('' for none, ROUTE_CLASS for a Route). */
export interface NamedHosts {
  hosts: string[];
  cls: string;
}

export interface IngressClassInfo {
  name: string;
  /** spec.controller, e.g. "k8s.io/ingress-nginx". */
  controller: string;
  isDefault: boolean;
}

/** What decides a host's controller: the classes of the Ingresses naming it, and the IngressClasses. */
export interface HostClasses {
  host: string;
  classes: string[];
  /** The cluster's IngressClasses; undefined when they cannot be read (403, not synced). */
  ingressClasses?: ReadonlyMap<string, IngressClassInfo>;
}

interface Meta {
  metadata?: { name?: unknown; annotations?: Record<string, unknown> };
  spec?: { ingressClassName?: unknown; controller?: unknown };
}

/** An Ingress's class name, '' when it names none. */
export function ingressClassOf(obj: unknown): string {
  const o = obj as Meta | undefined;
  const named = o?.spec?.ingressClassName ?? o?.metadata?.annotations?.[LEGACY_CLASS_ANNOTATION];
  return typeof named === 'string' ? named.trim() : '';
}

export function ingressClassInfoOf(obj: unknown): IngressClassInfo {
  const o = obj as Meta | undefined;
  const name = typeof o?.metadata?.name === 'string' ? o.metadata.name : '';
  const controller = typeof o?.spec?.controller === 'string' ? o.spec.controller : '';
  // Compared as the DefaultIngressClass admission plugin does (networking/v1 IsDefaultIngressClass).
  const isDefault = o?.metadata?.annotations?.[DEFAULT_CLASS_ANNOTATION] === 'true';
  return { name, controller, isDefault };
}

/**
 * The controllers a host's Ingresses ask for: controller value → the classes that ask for it
 * ("class internal", "the default class nginx", "an OpenShift Route"). Classes the proxy cannot
 * place (no IngressClass of that name, IngressClasses unreadable, no class and no single default)
 * ask for none: the host then goes where it went before classes were read, the first controller.
 */
export function wantedControllers(host: HostClasses): Map<string, string[]> {
  const wanted = new Map<string, string[]>();
  const add = (controller: string, why: string) => {
    if (!controller) return;
    const list = wanted.get(controller) ?? [];
    if (!list.includes(why)) list.push(why);
    wanted.set(controller, list);
  };
  const table = host.ingressClasses;
  for (const cls of host.classes) {
    if (cls === ROUTE_CLASS) add(OPENSHIFT_ROUTER_CONTROLLER, 'an OpenShift Route');
    else if (!table) continue;
    else if (cls === '') {
      const defaults = [...table.values()].filter((c) => c.isDefault);
      if (defaults.length === 1) add(defaults[0]!.controller, `no class (the default class "${defaults[0]!.name}")`);
    } else {
      const info = table.get(cls);
      if (info) add(info.controller, `class "${cls}"`);
    }
  }
  return wanted;
}
