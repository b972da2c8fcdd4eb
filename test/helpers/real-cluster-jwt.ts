// JWT authentication for the real-cluster bed: kube-apiserver's structured authentication config
// (--authentication-config, an AuthenticationConfiguration with one jwt issuer) naming the local
// issuer of oidc-issuer.ts (discovery and JWKS over TLS on loopback, its CA inline). The API
// server verifies each token's signature, issuer, audience and `exp` itself, so a short-lived
// token is refused once it has expired, as a cloud's OIDC-backed cluster refuses it.
import type { OidcIssuer } from './oidc-issuer.js';

/** Users the issuer's tokens name are `oidc:<sub>` for RBAC. */
export const JWT_USER_PREFIX = 'oidc:';

/** The AuthenticationConfiguration (YAML) that makes kube-apiserver take `issuer`'s ID tokens. */
export function jwtAuthenticationConfig(issuer: Pick<OidcIssuer, 'url' | 'caPem' | 'clientId'>): string {
  const ca = issuer.caPem
    .trim()
    .split('\n')
    .map((l) => `      ${l}`)
    .join('\n');
  return `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ${issuer.url}
    audiences: [${issuer.clientId}]
    certificateAuthority: |
${ca}
  claimMappings:
    username:
      claim: sub
      prefix: "${JWT_USER_PREFIX}"
`;
}

/** A ClusterRoleBinding of `role` (default cluster-admin) to the issuer's user `sub`. */
export function jwtUserBinding(sub: string, role = 'cluster-admin'): string {
  return `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: jwt-${sub.replace(/[^a-z0-9]/g, '-')}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: ${role}
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: ${JWT_USER_PREFIX}${sub}
`;
}
