// How we reach an apiserver-network-proxy server, as a konnectivity route's config says it. The
// server offers its frontend in one mode at a time (cmd/server/app/options/options.go --mode
// grpc|http-connect): on a TCP port with TLS, client certificates required when a CA is given
// (cmd/server/app/server.go getTLSConfig: RequireAndVerifyClientCert), or on a unix socket
// (--uds-name) without TLS.
import { readFile } from 'node:fs/promises';
import { StartupError, errorMessage } from '../core/errors.js';

export const KONNECTIVITY_MODES = ['grpc', 'http-connect'] as const;
export type KonnectivityMode = (typeof KONNECTIVITY_MODES)[number];

/** As written in the config file: `server` is https://host:port or unix:///path; the rest are file paths. */
export interface KonnectivitySpec {
  server: string;
  mode: KonnectivityMode;
  ca?: string;
  cert?: string;
  key?: string;
}

export type ServerAddress = { kind: 'tcp'; host: string; port: number } | { kind: 'unix'; path: string };

/** Parses `server`; throws an Error whose message says what is wrong (config/ adds file and line). */
export function parseServerAddress(text: string): ServerAddress {
  if (text.startsWith('unix://')) {
    const path = text.slice('unix://'.length);
    if (!path.startsWith('/')) throw new Error(`"${text}": a unix socket is written unix:///absolute/path`);
    return { kind: 'unix', path };
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`"${text}" is not https://host:port or unix:///path`);
  }
  if (url.protocol !== 'https:') throw new Error(`"${text}": the server is https://host:port (TLS) or unix:///path, not ${url.protocol}//`);
  if (url.pathname !== '/' || url.search || url.hash || url.username) throw new Error(`"${text}": only scheme, host and port are allowed`);
  if (!url.port) throw new Error(`"${text}" needs a port (the konnectivity server's frontend, often 8090 or 8131)`);
  return { kind: 'tcp', host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port) };
}

/** Which TLS files a spec needs; an Error message when the combination cannot work. */
export function tlsProblem(spec: Pick<KonnectivitySpec, 'server' | 'ca' | 'cert' | 'key'>): string | undefined {
  const address = parseServerAddress(spec.server);
  const files = [spec.ca, spec.cert, spec.key].filter((f) => f !== undefined);
  if (address.kind === 'unix') return files.length ? 'a unix socket server takes no ca, cert or key (the server speaks plain gRPC or HTTP there)' : undefined;
  if ((spec.cert === undefined) !== (spec.key === undefined)) return 'cert and key go together (the client certificate and its private key)';
  return undefined;
}

export interface TlsMaterial {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

/** Reads the TLS files of a spec (never logged; errors name the file, not its contents). */
export async function loadTls(spec: KonnectivitySpec): Promise<TlsMaterial> {
  const read = async (what: string, file: string | undefined) => {
    if (file === undefined) return undefined;
    try {
      return await readFile(file);
    } catch (err) {
      throw new StartupError(`konnectivity ${what} file ${file}: ${errorMessage(err)}`, { cause: err });
    }
  };
  return { ca: await read('ca', spec.ca), cert: await read('cert', spec.cert), key: await read('key', spec.key) };
}
