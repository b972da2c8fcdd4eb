// The `kubectl auth can-i` line that asks RBAC what the API server's 403 refused, from its words
// (`User "u" cannot watch resource "services" in API group "" in the namespace "shop"`).

/** `kubectl auth can-i VERB RESOURCE[.GROUP] -n NS`, or undefined for words that name no right. */
export function canILine(refusal: string, namespace: string): string | undefined {
  const m = /cannot (\w+) resource "([^"/]+)(?:\/([^"]+))?"(?: in API group "([^"]*)")?/.exec(refusal);
  if (!m) return undefined;
  const [, verb, resource, subresource, group] = m;
  // kubectl reads TYPE/NAME: a subresource is a flag, and a group follows the resource after a dot.
  const what = subresource ? `${resource} --subresource=${subresource}` : group ? `${resource}.${group}` : resource;
  return `kubectl auth can-i ${verb} ${what} -n ${namespace}`;
}

/** The API server's refusal, with the kubectl line that asks RBAC the same when its words name a right. */
export function withCanI(refusal: string, namespace: string): string {
  const check = canILine(refusal, namespace);
  return check ? `${refusal} (check: ${check})` : refusal;
}
