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

/** One class of a host, placed: its IngressClass name and controller, when the proxy can tell. */
export interface PlacedClass {
  /** The IngressClass name (the default class's for an Ingress without one); undefined for a Route. */
  name?: string;
  /** The IngressClass's spec.controller (the OpenShift router's for a Route); undefined when unknown. */
  controller?: string;
  /** For messages: 'class "internal"', 'no class (the default class "nginx")', 'an OpenShift Route'. */
  why: string;
}

/**
 * The classes of the Ingresses (and Routes) naming a host, placed. A class the proxy cannot place
 * (no IngressClass of that name, IngressClasses unreadable) keeps its name but no controller; an
 * Ingress without class and no single default class is left out: such a host goes where it went
 * before classes were read, the first controller.
 */
export function placeClasses(host: HostClasses): PlacedClass[] {
  const out: PlacedClass[] = [];
  const table = host.ingressClasses;
  for (const cls of host.classes) {
    if (cls === ROUTE_CLASS) out.push({ controller: OPENSHIFT_ROUTER_CONTROLLER, why: 'an OpenShift Route' });
    else if (cls === '') {
      const defaults = table ? [...table.values()].filter((c) => c.isDefault) : [];
      const d = defaults.length === 1 ? defaults[0]! : undefined;
      if (d) out.push({ name: d.name, controller: d.controller || undefined, why: `no class (the default class "${d.name}")` });
    } else out.push({ name: cls, controller: table?.get(cls)?.controller || undefined, why: `class "${cls}"` });
  }
  return out;
}
