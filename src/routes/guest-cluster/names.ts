// How a DNS name maps onto cluster objects, following the Kubernetes DNS specification
// (kubernetes/dns docs/specification.md): <svc>.<ns>.svc.<zone>, <hostname>.<subdomain>.<ns>.svc.<zone>
// for pods behind headless Services, and <a-b-c-d>.<ns>.pod.<zone>. Short forms are what a pod's
// resolv.conf search path would complete.

export type ClusterName =
  /** A Service; `namespaceNeedsCheck` when the name was the ambiguous two-label `svc.ns`. */
  | { kind: 'service'; namespace: string; service: string; namespaceNeedsCheck: boolean }
  /** A pod behind a headless Service: <hostname>.<service>.<ns>.svc… */
  | { kind: 'pod-hostname'; namespace: string; service: string; hostname: string }
  /** <a-b-c-d>.<ns>.pod.<zone>: the pod with that IP. */
  | { kind: 'pod-ip'; namespace: string; ip: string };

/** RFC 1123 label, as Kubernetes requires of Service, namespace and pod host names. */
const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** Whether `name` can name a namespace (an RFC 1123 label: the API server refuses any other). */
export function isNamespaceName(name: string): boolean {
  return LABEL.test(name);
}

/** Lowercase, without a trailing dot; undefined when it is not a syntactically valid DNS name. */
export function normalizeName(host: string): string | undefined {
  const name = host.toLowerCase().replace(/\.$/, '');
  if (name.length === 0 || name.length > 253) return undefined;
  const labels = name.split('.');
  return labels.every((l) => LABEL.test(l)) ? name : undefined;
}

/**
 * Parses a name into the cluster object it would denote, or undefined when the name is not a
 * cluster name at all (so the router may hand it elsewhere). Only names ending in the cluster
 * domain, `.svc`, a single label, or `svc.ns` qualify.
 */
export function parseClusterName(host: string, clusterDomain: string, defaultNamespace: string): ClusterName | undefined {
  const name = normalizeName(host);
  if (!name) return undefined;
  const domain = clusterDomain.toLowerCase().replace(/^\.|\.$/g, '');
  let labels = name.split('.');
  const domainLabels = domain.split('.');
  const hasDomain = labels.length > domainLabels.length && labels.slice(-domainLabels.length).join('.') === domain;
  if (hasDomain) labels = labels.slice(0, -domainLabels.length);
  else if (name === domain) return undefined;

  const last = labels[labels.length - 1];
  if (last === 'svc') {
    if (labels.length === 3) return { kind: 'service', service: labels[0], namespace: labels[1], namespaceNeedsCheck: false };
    if (labels.length === 4) return { kind: 'pod-hostname', hostname: labels[0], service: labels[1], namespace: labels[2] };
    return undefined;
  }
  if (last === 'pod' && labels.length === 3) {
    const ip = dashedIp(labels[0]);
    return ip ? { kind: 'pod-ip', ip, namespace: labels[1] } : undefined;
  }
  if (hasDomain) return undefined;
  if (labels.length === 1) return { kind: 'service', service: labels[0], namespace: defaultNamespace, namespaceNeedsCheck: false };
  if (labels.length === 2) return { kind: 'service', service: labels[0], namespace: labels[1], namespaceNeedsCheck: true };
  return undefined;
}

/**
 * The pod a short name `<hostname>.<service>` or `<hostname>.<service>.<namespace>` would denote
 * as a pod's resolv.conf search path completes it (`<ns>.svc.<zone>`, then `svc.<zone>`): a
 * StatefulSet peer as its tutorials name it (`mysql-0.mysql`). Only a syntactic reading: the
 * caller asks the cluster whether DNS names that pod (a two-label name may be `svc.ns` instead).
 */
export function shortHostnameName(host: string, defaultNamespace: string): ClusterName | undefined {
  const name = normalizeName(host);
  if (!name) return undefined;
  const labels = name.split('.');
  if (labels.length === 2) return { kind: 'pod-hostname', hostname: labels[0], service: labels[1], namespace: defaultNamespace };
  if (labels.length === 3 && labels[2] !== 'svc' && labels[2] !== 'pod') {
    return { kind: 'pod-hostname', hostname: labels[0], service: labels[1], namespace: labels[2] };
  }
  return undefined;
}

/** "10-244-1-7" → "10.244.1.7"; IPv6 pod records use dashes for colons. */
export function dashedIp(label: string): string | undefined {
  const v4 = label.split('-');
  if (v4.length === 4 && v4.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return v4.join('.');
  if (label.includes('--') || v4.length > 4) {
    const v6 = label.replace(/-/g, ':');
    return /^[0-9a-f:]+$/.test(v6) ? v6 : undefined;
  }
  return undefined;
}

/** True when the name is claimed by the cluster domain even if nothing there matches it. */
export function isUnderClusterDomain(host: string, clusterDomain: string): boolean {
  const name = normalizeName(host);
  const domain = clusterDomain.toLowerCase().replace(/^\.|\.$/g, '');
  return !!name && (name.endsWith(`.${domain}`) || name.endsWith('.svc'));
}

/**
 * The cluster name an ExternalName Service's CNAME target denotes: only a full name in the cluster
 * domain, since CoreDNS follows a CNAME itself only within its zone (plugin/backend_lookup.go) and
 * a client's resolver never applies the search path to a CNAME target.
 */
export function parseZoneName(host: string, clusterDomain: string): ClusterName | undefined {
  const name = normalizeName(host);
  const domain = clusterDomain.toLowerCase().replace(/^\.|\.$/g, '');
  return name?.endsWith(`.${domain}`) ? parseClusterName(name, domain, '') : undefined;
}

/**
 * The names a cluster route answers under its own name R when several clusters share a proxy:
 * <svc>.<ns>.svc.R, <svc>.<ns>.R, headless <pod>.<svc>.<ns>.svc.R and <a-b-c-d>.<ns>.pod.R — the
 * cluster-domain forms with R in place of the domain, plus the short <svc>.<ns>.R. Undefined for
 * anything else under R (the route then says there is no such Service or Pod).
 */
export function parseRouteName(host: string, routeSuffix: string): ClusterName | undefined {
  const name = normalizeName(host);
  if (!name || !name.endsWith(`.${routeSuffix}`)) return undefined;
  const parsed = parseClusterName(name, routeSuffix, '');
  if (parsed) return parsed;
  const labels = name.slice(0, -routeSuffix.length - 1).split('.');
  if (labels.length !== 2 || labels[1] === 'svc' || labels[1] === 'pod') return undefined;
  return { kind: 'service', service: labels[0], namespace: labels[1], namespaceNeedsCheck: false };
}

/**
 * A two-label name read as SERVICE.NAMESPACE whose namespace the cluster does not have: what it
 * would have been, in the user's terms (`example.com` is no Service "example" in a namespace "com").
 */
export function noSuchNamespace(host: string, service: string, namespace: string): string {
  return `${host} is no cluster name: as one it would be Service "${service}" in namespace "${namespace}", and there is no namespace "${namespace}"`;
}

/**
 * The cluster domain a name looks written for when it has a cluster name's form (SVC.NS.svc.D,
 * POD.SVC.NS.svc.D, A-B-C-D.NS.pod.D) under a domain D other than `clusterDomain`; else undefined.
 */
export function otherClusterDomain(host: string, clusterDomain: string): string | undefined {
  const labels = normalizeName(host)?.split('.');
  if (!labels) return undefined;
  const at = labels[2] === 'svc' || labels[2] === 'pod' ? 2 : labels[3] === 'svc' ? 3 : -1;
  if (at < 0 || at === labels.length - 1) return undefined;
  const domain = labels.slice(at + 1).join('.');
  return domain === clusterDomain.toLowerCase().replace(/^\.|\.$/g, '') ? undefined : domain;
}
