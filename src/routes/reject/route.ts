// The reject route: names and blocks a table gives it are refused (SOCKS 0x02, HTTP 403), even
// when a shorter rule or direct pass-through would have served them.
import type { OpenRequest, OpenedStream } from '../../core/types.js';
import { NotAllowedError } from '../../core/errors.js';
import type { Route, RouteStatus } from '../route.js';
import type { RouteClaim } from '../route.js';

export class RejectRoute implements Route {
  readonly kind = 'reject';

  constructor(readonly name: string) {}

  open(request: OpenRequest, claim?: RouteClaim, _signal?: AbortSignal): Promise<OpenedStream> {
    return Promise.reject(new NotAllowedError(`${claim?.host ?? request.destination.host} is blocked by route ${this.name}`));
  }

  async start(): Promise<void> {}

  status(): RouteStatus {
    return { name: this.name, kind: this.kind, state: 'ready' };
  }

  async close(): Promise<void> {}
}
