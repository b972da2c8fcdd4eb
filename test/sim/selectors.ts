// Label and field selectors, as the API server parses them from list/watch query parameters.
// Label syntax follows staging/src/k8s.io/apimachinery/pkg/labels/selector.go (=, ==, !=, in,
// notin, exists, !exists; comma = AND). Field syntax follows
// staging/src/k8s.io/apimachinery/pkg/fields/selector.go (=, ==, !=), with the selectable fields
// each kind registers (metadata.name and metadata.namespace for all; a few more for pods, like
// pkg/registry/core/pod/strategy.go ToSelectableFields). Unknown field → 400 "field label not
// supported", as the conversion funcs in pkg/apis/core/v1/conversion.go answer.
import type { KObject, Resource } from './store.js';

export class SelectorError extends Error {}

export interface LabelRequirement {
  key: string;
  op: 'eq' | 'neq' | 'exists' | 'notexists' | 'in' | 'notin';
  values: string[];
}

export interface FieldRequirement {
  key: string;
  op: 'eq' | 'neq';
  value: string;
}

/** Splits on commas that are not inside parentheses. */
function splitTopLevel(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else {
      cur += ch;
    }
  }
  parts.push(cur);
  return parts.map((p) => p.trim()).filter((p) => p.length > 0);
}

const LABEL_KEY = /^([a-z0-9A-Z]([-a-z0-9A-Z.]*[a-z0-9A-Z])?\/)?[a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?$/;
const LABEL_VALUE = /^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?)?$/;

function checkKey(k: string): string {
  if (!LABEL_KEY.test(k)) throw new SelectorError(`unable to parse requirement: invalid label key "${k}"`);
  return k;
}

function checkValue(v: string): string {
  if (!LABEL_VALUE.test(v)) throw new SelectorError(`unable to parse requirement: invalid label value: "${v}"`);
  return v;
}

export function parseLabelSelector(s: string | undefined): LabelRequirement[] {
  if (!s) return [];
  const out: LabelRequirement[] = [];
  for (const part of splitTopLevel(s)) {
    let m: RegExpMatchArray | null;
    if ((m = part.match(/^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/))) {
      const values = m[3]!
        .split(',')
        .map((v) => checkValue(v.trim()))
        .filter((v) => v !== '');
      out.push({ key: checkKey(m[1]!), op: m[2] === 'in' ? 'in' : 'notin', values });
    } else if ((m = part.match(/^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/))) {
      out.push({ key: checkKey(m[1]!), op: m[2] === '!=' ? 'neq' : 'eq', values: [checkValue(m[3]!)] });
    } else if ((m = part.match(/^!\s*(\S+)$/))) {
      out.push({ key: checkKey(m[1]!), op: 'notexists', values: [] });
    } else if ((m = part.match(/^(\S+)$/))) {
      out.push({ key: checkKey(m[1]!), op: 'exists', values: [] });
    } else {
      throw new SelectorError(`unable to parse requirement: found '${part}', expected: identifier`);
    }
  }
  return out;
}

export function matchesLabels(reqs: LabelRequirement[], labels: Record<string, string> | undefined): boolean {
  const l = labels ?? {};
  return reqs.every((r) => {
    const has = Object.prototype.hasOwnProperty.call(l, r.key);
    const v = l[r.key];
    switch (r.op) {
      case 'eq':
        return has && v === r.values[0];
      case 'neq':
        return !has || v !== r.values[0];
      case 'exists':
        return has;
      case 'notexists':
        return !has;
      case 'in':
        return has && r.values.includes(v!);
      case 'notin':
        return !has || !r.values.includes(v!);
    }
  });
}

export function parseFieldSelector(s: string | undefined, resource: Resource): FieldRequirement[] {
  if (!s) return [];
  const out: FieldRequirement[] = [];
  for (const part of splitTopLevel(s)) {
    const m = part.match(/^([^=!]+?)\s*(==|=|!=)\s*(.*)$/);
    if (!m) throw new SelectorError(`invalid selector: '${s}'; can't understand '${part}'`);
    const k = m[1]!.trim();
    if (fieldValue(resource, { apiVersion: '', kind: '', metadata: { name: '' } }, k) === undefined) {
      throw new SelectorError(`field label not supported: ${k}`);
    }
    out.push({ key: k, op: m[2] === '!=' ? 'neq' : 'eq', value: m[3]!.trim() });
  }
  return out;
}

/** Selectable field value, or undefined when the kind does not support that field. */
export function fieldValue(resource: Resource, obj: KObject, k: string): string | undefined {
  if (k === 'metadata.name') return obj.metadata.name ?? '';
  if (k === 'metadata.namespace') return obj.metadata.namespace ?? '';
  const o = obj as Record<string, any>;
  if (resource === 'pods') {
    if (k === 'spec.nodeName') return o.spec?.nodeName ?? '';
    if (k === 'spec.restartPolicy') return o.spec?.restartPolicy ?? '';
    if (k === 'spec.schedulerName') return o.spec?.schedulerName ?? '';
    if (k === 'spec.serviceAccountName') return o.spec?.serviceAccountName ?? '';
    if (k === 'spec.hostNetwork') return String(o.spec?.hostNetwork === true);
    if (k === 'status.phase') return o.status?.phase ?? '';
    if (k === 'status.podIP') return o.status?.podIPs?.[0]?.ip ?? '';
    if (k === 'status.nominatedNodeName') return '';
  }
  if (resource === 'namespaces' && k === 'status.phase') return o.status?.phase ?? '';
  if (resource === 'services' && k === 'spec.clusterIP') return o.spec?.clusterIP ?? '';
  if (resource === 'services' && k === 'spec.type') return o.spec?.type ?? '';
  if (resource === 'endpointslices' && k === 'addressType') return o.addressType ?? '';
  return undefined;
}

export function matchesFields(resource: Resource, reqs: FieldRequirement[], obj: KObject): boolean {
  return reqs.every((r) => {
    const v = fieldValue(resource, obj, r.key);
    return r.op === 'eq' ? v === r.value : v !== r.value;
  });
}
