// metav1.Status error bodies, worded like staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go
// (NewNotFound, NewForbidden, NewBadRequest, NewUnauthorized, NewResourceExpired, NewMethodNotSupported,
// NewTooManyRequests).
import type { ResourceInfo } from './store.js';

export interface StatusBody {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, unknown>;
  status: 'Failure';
  message: string;
  reason: string;
  details?: Record<string, unknown>;
  code: number;
}

export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: Record<string, unknown>,
    /** The Status's ListMeta (a 410 for a compacted continue token carries a token there). */
    readonly listMeta: Record<string, unknown> = {},
  ) {
    super(message);
  }

  body(): StatusBody {
    const b: StatusBody = {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: { ...this.listMeta },
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      code: this.code,
    };
    if (!this.details) return b;
    const { code, ...rest } = b;
    return { ...rest, details: this.details, code };
  }
}

/** "services", or "endpointslices.discovery.k8s.io" for a non-core group. */
export function qualifiedResource(info: Pick<ResourceInfo, 'resource' | 'group'>, subresource?: string): string {
  const r = subresource ? `${info.resource}/${subresource}` : info.resource;
  return info.group ? `${info.resource}.${info.group}` + (subresource ? `/${subresource}` : '') : r;
}

function details(info: Pick<ResourceInfo, 'resource' | 'group'>, name?: string): Record<string, unknown> {
  const d: Record<string, unknown> = {};
  if (name) d.name = name;
  if (info.group) d.group = info.group;
  d.kind = info.resource;
  return d;
}

export function notFound(info: Pick<ResourceInfo, 'resource' | 'group'>, name: string): ApiError {
  return new ApiError(404, 'NotFound', `${qualifiedResource(info)} "${name}" not found`, details(info, name));
}

export function unauthorized(): ApiError {
  return new ApiError(401, 'Unauthorized', 'Unauthorized');
}

export function forbidden(
  user: string,
  verb: string,
  info: Pick<ResourceInfo, 'resource' | 'group'>,
  namespace: string | undefined,
  name?: string,
  subresource?: string,
): ApiError {
  const res = subresource ? `${info.resource}/${subresource}` : info.resource;
  const scope = namespace ? `in the namespace "${namespace}"` : 'at the cluster scope';
  const what = `User "${user}" cannot ${verb} resource "${res}" in API group "${info.group}" ${scope}`;
  const subject = name ? `${qualifiedResource(info)} "${name}"` : qualifiedResource(info);
  return new ApiError(403, 'Forbidden', `${subject} is forbidden: ${what}`, details(info, name));
}

/**
 * A watch cache that is not ready (apiserver pkg/storage/cacher: cacher.go Watch and GetList,
 * util.go calculateRetryAfterForUnreadyCache): 429 with Retry-After growing with the downtime.
 */
export function storageInitializing(downtimeMs: number): ApiError {
  const retryAfterSeconds = Math.trunc(Math.min(30, Math.max(1, Math.exp(0.06 * (downtimeMs / 1000)))));
  return new ApiError(429, 'TooManyRequests', 'storage is (re)initializing', { retryAfterSeconds });
}

export function badRequest(message: string): ApiError {
  return new ApiError(400, 'BadRequest', message);
}

export function expired(message: string): ApiError {
  return new ApiError(410, 'Expired', message);
}

export function methodNotAllowed(): ApiError {
  return new ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
}

export function pathNotFound(): ApiError {
  // Empty details: the causes kubectl prints (UnexpectedServerResponse) are client-go's own addition.
  return new ApiError(404, 'NotFound', 'the server could not find the requested resource', {});
}

export function notAcceptable(): ApiError {
  return new ApiError(
    406,
    'NotAcceptable',
    'only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf',
  );
}
