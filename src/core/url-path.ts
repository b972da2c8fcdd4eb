// A file path inside a URL, as curl's socks5h://localhost/PATH names a SOCKS proxy on a unix
// socket (curl ≥ 7.84, lib/url.c parse_proxy). RFC 3986 §2: the path keeps unreserved characters
// and "/" as they are; everything else is percent-encoded, byte by byte of its UTF-8 form. curl
// decodes the path it is given (CURLU_URLDECODE), so a space or a "%" reaches it intact; a raw
// space makes it refuse the URL ("Unsupported proxy syntax"), and "?" or "#" would end the path.

const PLAIN = /^[A-Za-z0-9._~/-]*$/;

/** True when the path needs no percent-encoding in a URL (and nothing in it means anything to a shell). */
export function isPlainUrlPath(path: string): boolean {
  return PLAIN.test(path);
}

/** The path percent-encoded for a URL: unreserved characters and "/" as they are. */
export function encodeUrlPath(path: string): string {
  if (isPlainUrlPath(path)) return path;
  let out = '';
  for (const byte of Buffer.from(path, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += byte < 0x80 && PLAIN.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/**
 * curl (7.84 to at least 8.14, built with IDN support) takes "localhost/PATH" for a host name and
 * passes a non-ASCII one to IDN conversion, which fails ("URL using bad/illegal format"), encoded or
 * not: such a socket cannot be named to curl at all.
 */
export function curlCannotName(path: string): boolean {
  return /[^\x00-\x7f]/.test(path);
}
