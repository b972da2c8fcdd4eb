// Which addresses a direct route dials. By default not this machine's own (loopback, "this host"),
// its link's (link-local) or cloud instance-metadata endpoints: through a proxy, those would hand
// every client the machine's local services and its cloud credentials (SSRF). Judged on the address
// actually dialled, after DNS; a route's `allow` list opts back in. Blocks from RFC 6890's
// special-purpose registries, and the metadata addresses clouds document outside them.
import { CidrIndex, parseCidr, type Cidr, type IpAddress } from '../../core/cidr.js';

const REFUSED_BLOCKS: ReadonlyArray<readonly [string, string]> = [
  ['0.0.0.0/8', '"this host" address (it reaches this machine)'],
  ['127.0.0.0/8', 'loopback address'],
  ['169.254.0.0/16', 'link-local address'],
  ['169.254.169.254/32', 'cloud instance-metadata address'],
  ['100.100.100.200/32', 'cloud instance-metadata address'],
  ['::/96', 'deprecated IPv4-compatible IPv6 address'],
  ['::/128', 'unspecified address (it reaches this machine)'],
  ['::1/128', 'loopback address'],
  ['fe80::/10', 'link-local address'],
  ['fd00:ec2::254/128', 'cloud instance-metadata address'],
  ['fd20:ce::254/128', 'cloud instance-metadata address'],
];

const refused = new CidrIndex<string>();
for (const [block, what] of REFUSED_BLOCKS) refused.add(parseCidr(block), what);

/** The blocks refused by default, for docs and messages. */
export const DEFAULT_REFUSED_BLOCKS: readonly string[] = REFUSED_BLOCKS.map(([block]) => block);

export class DirectDialPolicy {
  private readonly allowed = new CidrIndex<true>();

  constructor(allow: ReadonlyArray<Cidr> = []) {
    for (const block of allow) this.allowed.add(block, true);
  }

  /** undefined when the route may dial ip; else what kind of address it is ("loopback address"). */
  refusal(ip: IpAddress): string | undefined {
    const what = refused.lookup(ip)?.value;
    if (what === undefined || this.allowed.lookup(ip)) return undefined;
    return what;
  }
}
