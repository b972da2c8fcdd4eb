// The reject route: names and blocks a table gives it are refused (SOCKS 0x02, HTTP 403), even
// when a shorter rule or direct pass-through would have served them.
import type { OpenRequest, OpenedStream } from '../core/types.js';
import { NotAllowedError } from '../core/errors.js';

export class RejectRoute {
  readonly kind = 'reject';

  constructor(readonly name: string) {}

  open(request: OpenRequest, _signal: AbortSignal, host: string = request.destination.host): Promise<OpenedStream> {
    return Promise.reject(new NotAllowedError(`${host} is blocked by route ${this.name}`));
  }
}
