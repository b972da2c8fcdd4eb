// Answers that did not come from the API server but from what stands in front of it: an ingress,
// a proxy or a sign-in front (Rancher, an SSO gateway) answers with an HTML page or a redirect to
// its login page. Their first line (`<!DOCTYPE html>`) or a JSON parse error says nothing; these
// say what answered, so the user looks at the server URL or logs in.

const TITLE_MAX = 120;

/** What in front of the API server may have answered instead of it, for messages. */
const IN_FRONT = 'not the API server: a proxy, load balancer or sign-in page in front of it answered';

/** `an HTML page "Title" (…)` when the text is an HTML page; else undefined. */
export function htmlPageMessage(text: string): string | undefined {
  if (!/^\s*(<!doctype html|<html[\s>]|<head[\s>]|<body[\s>]|<title[\s>])/i.test(text)) return undefined;
  const heading = /<title[^>]*>([^<]*)</i.exec(text)?.[1] ?? /<h1[^>]*>([^<]*)</i.exec(text)?.[1];
  const title = heading?.replace(/&amp;/g, '&').replace(/\s+/g, ' ').trim();
  const named = title ? ` "${title.length > TITLE_MAX ? `${title.slice(0, TITLE_MAX)}…` : title}"` : '';
  return `an HTML page${named} (${IN_FRONT})`;
}

/**
 * A 3xx answer: where it sends us. The API server never redirects its clients; a sign-in front
 * sends them to its login page. The query is left out: it may carry a session or a token.
 */
export function redirectMessage(status: number, location: string | string[] | undefined): string | undefined {
  if (status < 300 || status >= 400 || typeof location !== 'string' || !location) return undefined;
  let where = location;
  try {
    const u = new URL(location, 'https://api.invalid');
    where = location.startsWith('/') ? u.pathname : `${u.origin}${u.pathname}`;
  } catch {
    where = location.split('?')[0]!;
  }
  return `a redirect to ${where.slice(0, 300)} (${IN_FRONT}; log in there, or check the server URL in the kubeconfig)`;
}

/** A 2xx answer that is not JSON: an HTML page said as such, else `invalid JSON from PATH`. */
export function notJsonMessage(path: string, text: string): string {
  const html = htmlPageMessage(text);
  return html ? `${path} answered with ${html}` : `invalid JSON from ${path}`;
}

/**
 * A server (or the front before it) that speaks only HTTP/2 refuses our HTTP/1.1 at the TLS
 * handshake (ALPN, alert 120). Port-forward upgrades need HTTP/1.1 — client-go asks for it on its
 * upgrades too — so this is said plainly instead of an OpenSSL line. Other errors pass unchanged.
 */
export function explainHandshakeError(err: Error & { code?: string }): Error & { code?: string } {
  if (err.code !== 'ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL' && !/alert no application protocol/.test(err.message)) return err;
  const message =
    'the server refused HTTP/1.1 in the TLS handshake (it offers only HTTP/2): port-forward upgrades need HTTP/1.1, as for kubectl port-forward; point the kubeconfig at an address of the API server, or a proxy before it, that offers HTTP/1.1';
  return Object.assign(new Error(message, { cause: err }), { code: err.code });
}
