// The first-byte client of bench/forwarding-cost.ts in a process of its own, as curl or a browser
// would be: connect → one byte → its echo through each path in turn, `warmup` unmeasured rounds
// then `rounds` measured ones. Argument: JSON { paths: [{ name, ...FirstByteTarget }], warmup,
// rounds }. Prints the p50/p99 per path as JSON on stdout.
import { interleavedFirstByteRounds } from './measure.js';
import { socksOpener, tcpOpener } from './multiplex.js';

/** A TCP port (host, port), or a destination reached through a SOCKS5 proxy at `socks`. */
export interface FirstByteTarget {
  host: string;
  port: number;
  socks?: string;
}

interface Config {
  paths: Array<FirstByteTarget & { name: string }>;
  warmup: number;
  rounds: number;
}

// forwarding-cost.ts imports only the type above, so this runs only as the client process.
const config = JSON.parse(process.argv[2] ?? '') as Config;
const paths = config.paths.map((p) => ({ name: p.name, echo: p.socks ? socksOpener(p.socks, p.host, p.port) : tcpOpener(p.host, p.port) }));
if (config.warmup > 0) await interleavedFirstByteRounds(paths, config.warmup);
process.stdout.write(JSON.stringify(await interleavedFirstByteRounds(paths, config.rounds)));
process.exit(0);
