// Rights a Role grants on a few named objects only (`resourceNames`): a SelfSubjectAccessReview
// without a name says no, as `kubectl auth can-i get pods --subresource=portforward` does, though
// the proxy can reach those pods. A SelfSubjectRulesReview lists such rules with their names.

export interface ResourceRule {
  verbs?: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
}

const covers = (list: string[] | undefined, value: string) => (list ?? []).some((v) => v === '*' || v === value);

/**
 * The names one of the rules grants every verb on, for a resource of the core group ("pods/portforward"),
 * sorted. A rule without names grants all, which a review without a name has already seen.
 */
export function namedGrants(rules: ResourceRule[], resource: string, verbs: string[]): string[] {
  const [base] = resource.split('/');
  const matches = (r: ResourceRule) => covers(r.apiGroups, '') && (covers(r.resources, resource) || (r.resources ?? []).includes(`${base}/*`));
  const perVerb = verbs.map((verb) => new Set(rules.filter((r) => matches(r) && covers(r.verbs, verb)).flatMap((r) => r.resourceNames ?? [])));
  const [first, ...rest] = perVerb;
  return [...(first ?? [])].filter((name) => rest.every((s) => s.has(name))).sort();
}
