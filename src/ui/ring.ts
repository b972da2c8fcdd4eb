/** The last `capacity` items pushed, oldest first: a fixed array, so memory stays bounded however many pass. */
export class Ring<T> {
  private readonly items: (T | undefined)[];
  private next = 0;
  private count = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`ring capacity must be a positive integer, got ${capacity}`);
    this.items = new Array<T | undefined>(capacity);
  }

  push(item: T): void {
    this.items[this.next] = item;
    this.next = (this.next + 1) % this.capacity;
    if (this.count < this.capacity) this.count++;
  }

  get size(): number {
    return this.count;
  }

  toArray(): T[] {
    const start = (this.next - this.count + this.capacity) % this.capacity;
    const out: T[] = [];
    for (let i = 0; i < this.count; i++) out.push(this.items[(start + i) % this.capacity] as T);
    return out;
  }
}
