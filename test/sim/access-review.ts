// SelfSubjectAccessReview (authorization.k8s.io/v1), what `kubectl auth can-i` and `doctor` ask:
// POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews answers 201 with the review and its
// status, for any authenticated user (kube-apiserver's system:basic-user ClusterRole grants
// create on it to everyone). Shaped like pkg/registry/authorization/selfsubjectaccessreview/rest.go
// and validated like pkg/apis/authorization/validation (exactly one of resourceAttributes or
// nonResourceAttributes). The decision is the simulator's stand-in RBAC (apiserver.ts authorize):
// cluster-wide identities may do anything; scoped ones anything inside their namespaces and
// nothing at the cluster scope; a non-resource URL only the discovery and health paths
// (system:discovery, system:public-info-viewer).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError, badRequest } from './status.js';
import { sendJson } from './rest.js';

export const ACCESS_REVIEW_PATH = '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews';
const MAX_BODY = 64 * 1024;
const PUBLIC_PATHS = new Set(['/api', '/api/*', '/apis', '/apis/*', '/version', '/healthz', '/livez', '/readyz']);

export interface ReviewIdentity {
  user: string;
  /** undefined = cluster-wide access; else only these namespaces. */
  namespaces?: string[];
  /** Refused wherever they are, as "verb resource[/subresource]" (apiserver.ts Identity). */
  denied?: string[];
}

interface ResourceAttributes {
  namespace?: string;
  verb?: string;
  group?: string;
  resource?: string;
  subresource?: string;
  name?: string;
}

/** The stand-in RBAC decision for one request; the same rule apiserver.ts applies to real requests. */
export function allows(id: ReviewIdentity, a: ResourceAttributes): boolean {
  if (id.denied?.includes(`${a.verb ?? ''} ${a.resource ?? ''}${a.subresource ? `/${a.subresource}` : ''}`)) return false;
  const allowed = id.namespaces;
  if (!allowed) return true;
  if (a.resource === 'namespaces' && (a.group ?? '') === '') return a.name !== undefined && a.name !== '' && allowed.includes(a.name);
  return !!a.namespace && allowed.includes(a.namespace);
}

export function authorizationGroup(): object {
  return {
    name: 'authorization.k8s.io',
    versions: [{ groupVersion: 'authorization.k8s.io/v1', version: 'v1' }],
    preferredVersion: { groupVersion: 'authorization.k8s.io/v1', version: 'v1' },
  };
}

export function authorizationV1Resources(): object {
  const review = (name: string, kind: string, namespaced: boolean) => ({ name, singularName: '', namespaced, kind, verbs: ['create'] });
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: 'authorization.k8s.io/v1',
    resources: [review('selfsubjectaccessreviews', 'SelfSubjectAccessReview', false)],
  };
}

export async function handleAccessReview(req: IncomingMessage, res: ServerResponse, id: ReviewIdentity): Promise<void> {
  if (req.method !== 'POST') throw new ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
  const body = await readBody(req);
  let spec: ReviewSpec;
  try {
    spec = (req.headers['content-type'] ?? '').startsWith(PROTOBUF)
      ? specFromProtobuf(body)
      : ((JSON.parse(body.toString('utf8')) as { spec?: ReviewSpec })?.spec ?? {});
  } catch (err) {
    throw badRequest(`the object provided is unrecognized (must be of type SelfSubjectAccessReview): ${(err as Error).message}`);
  }
  const ra = spec.resourceAttributes;
  const nra = spec.nonResourceAttributes;
  if ((ra === undefined) === (nra === undefined)) {
    throw new ApiError(
      422,
      'Invalid',
      'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec: Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified',
      {
        group: 'authorization.k8s.io',
        kind: 'SelfSubjectAccessReview',
      },
    );
  }
  const allowed = ra ? allows(id, ra) : !id.namespaces || (nra!.verb === 'get' && PUBLIC_PATHS.has(nra!.path ?? ''));
  const status: Record<string, unknown> = { allowed };
  if (allowed)
    status.reason = id.namespaces
      ? `RBAC: allowed by RoleBinding "proxyout" of Role "proxyout" to User "${id.user}"`
      : 'RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters"';
  sendJson(res, 201, {
    kind: 'SelfSubjectAccessReview',
    apiVersion: 'authorization.k8s.io/v1',
    metadata: { creationTimestamp: null },
    spec: ra ? { resourceAttributes: ra } : { nonResourceAttributes: nra },
    status,
  });
}

type ReviewSpec = { resourceAttributes?: ResourceAttributes; nonResourceAttributes?: { path?: string; verb?: string } };

// kubectl's typed clients send protobuf: the "k8s\0" magic, then a runtime.Unknown (1 typeMeta,
// 2 raw, …; apimachinery/pkg/runtime/generated.proto) whose raw is the SelfSubjectAccessReview
// (2 spec → 1 resourceAttributes | 2 nonResourceAttributes; api/authorization/v1/generated.proto).
const PROTOBUF = 'application/vnd.kubernetes.protobuf';
const RESOURCE_FIELDS: Record<number, keyof ResourceAttributes> = { 1: 'namespace', 2: 'verb', 3: 'group', 5: 'resource', 6: 'subresource', 7: 'name' };

function specFromProtobuf(body: Buffer): ReviewSpec {
  if (body.subarray(0, 4).toString('latin1') !== 'k8s\0') throw new Error('no protobuf magic');
  const raw = fields(body.subarray(4)).get(2)?.[0];
  const specBytes = raw && fields(raw).get(2)?.[0];
  if (!specBytes) return {};
  const spec = fields(specBytes);
  const strings = (b: Buffer, names: Record<number, string>) => {
    const out: Record<string, string> = {};
    for (const [n, values] of fields(b)) if (names[n]) out[names[n]] = values[0]!.toString('utf8');
    return out;
  };
  const ra = spec.get(1)?.[0];
  const nra = spec.get(2)?.[0];
  return {
    resourceAttributes: ra ? strings(ra, RESOURCE_FIELDS) : undefined,
    nonResourceAttributes: nra ? strings(nra, { 1: 'path', 2: 'verb' }) : undefined,
  };
}

/** Length-delimited fields of one protobuf message by field number (others skipped). */
function fields(b: Buffer): Map<number, Buffer[]> {
  const out = new Map<number, Buffer[]>();
  let i = 0;
  const varint = (): number => {
    let v = 0;
    for (let shift = 0; ; shift += 7) {
      if (i >= b.length) throw new Error('truncated protobuf');
      const byte = b[i++]!;
      v += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return v;
    }
  };
  while (i < b.length) {
    const tag = varint();
    const wire = tag & 7;
    if (wire === 0) varint();
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else if (wire === 2) {
      const len = varint();
      if (i + len > b.length) throw new Error('truncated protobuf');
      const list = out.get(Math.floor(tag / 8)) ?? [];
      list.push(b.subarray(i, i + len));
      out.set(Math.floor(tag / 8), list);
      i += len;
    } else throw new Error(`protobuf wire type ${wire}`);
  }
  return out;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) return reject(new ApiError(413, 'RequestEntityTooLarge', 'Request entity too large'));
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}
