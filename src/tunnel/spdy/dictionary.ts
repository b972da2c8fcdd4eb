// The SPDY/3 header-compression dictionary: the zlib preset dictionary both ends load before
// the first header block of a session (SPDY draft 3.1 §2.6.10.1). Follows moby/spdystream
// spdy/dictionary.go, which holds the same 1423 bytes as a byte literal. Here they are built from
// their two parts — 65 length-prefixed words (uint32 big-endian length, then the word), then a
// run of text — and checked against the length and the Adler-32 (0xE3C6A7C2) that zlib streams
// carry as DICTID, so a typo cannot go unnoticed.

const WORDS = [
  'options',
  'head',
  'post',
  'put',
  'delete',
  'trace',
  'accept',
  'accept-charset',
  'accept-encoding',
  'accept-language',
  'accept-ranges',
  'age',
  'allow',
  'authorization',
  'cache-control',
  'connection',
  'content-base',
  'content-encoding',
  'content-language',
  'content-length',
  'content-location',
  'content-md5',
  'content-range',
  'content-type',
  'date',
  'etag',
  'expect',
  'expires',
  'from',
  'host',
  'if-match',
  'if-modified-since',
  'if-none-match',
  'if-range',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'pragma',
  'proxy-authenticate',
  'proxy-authorization',
  'range',
  'referer',
  'retry-after',
  'server',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'user-agent',
  'vary',
  'via',
  'warning',
  'www-authenticate',
  'method',
  'get',
  'status',
  '200 OK',
  'version',
  'HTTP/1.1',
  'url',
  'public',
  'set-cookie',
  'keep-alive',
  'origin',
];

const TAIL =
  '100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505' +
  '203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized' +
  '403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable' +
  'Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT' +
  'chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,' +
  'text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.';

export const DICTIONARY_LENGTH = 1423;
export const DICTIONARY_ADLER32 = 0xe3c6a7c2;

/** Adler-32 (RFC 1950 §8.2), the checksum zlib uses for its data and its DICTID. */
export function adler32(data: Uint8Array): number {
  let a = 1;
  let b = 0;
  for (let i = 0; i < data.length; i++) {
    a = (a + data[i]!) % 65521;
    b = (b + a) % 65521;
  }
  return ((b << 16) | a) >>> 0;
}

function build(): Buffer {
  const parts: Buffer[] = [];
  for (const word of WORDS) {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(word.length);
    parts.push(len, Buffer.from(word, 'latin1'));
  }
  parts.push(Buffer.from(TAIL, 'latin1'));
  const dict = Buffer.concat(parts);
  if (dict.length !== DICTIONARY_LENGTH || adler32(dict) !== DICTIONARY_ADLER32) {
    throw new Error(`SPDY dictionary is corrupt: ${dict.length} bytes, Adler-32 ${adler32(dict).toString(16)}`);
  }
  return dict;
}

/** The 1423-byte SPDY/3 zlib dictionary. */
export const SPDY_DICTIONARY: Buffer = build();
