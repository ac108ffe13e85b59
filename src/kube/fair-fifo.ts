// The work queue's ready keys: a FIFO per namespace, served round-robin so one namespace cannot starve the others.
/** A FIFO with O(1) push and shift (Array.prototype.shift is O(n)). */
export class Fifo<T> {
  #items: T[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#head += 1;
    // Compact once the consumed prefix dominates, so memory tracks the live length.
    if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  clear(): void {
    this.#items = [];
    this.#head = 0;
  }
}

/**
 * Ready keys, one FIFO per flow (a namespace), served round-robin across the flows that have work: the
 * fair queuing of API Priority and Fairness without its shuffle sharding, as a controller has one queue
 * per flow to spare. A namespace with 5,000 ready keys delays another namespace's one key by at most one
 * key per other busy namespace; within a flow, keys keep their FIFO order. Tenants cannot create
 * namespaces, so the number of flows is the cluster admins' to decide.
 */
export class FairFifo {
  readonly #flowOf: (key: string) => string;
  readonly #flows = new Map<string, Fifo<string>>();
  // Flows with at least one key, in the order they get their next turn.
  readonly #turns = new Fifo<string>();
  #length = 0;

  constructor(flowOf: (key: string) => string) {
    this.#flowOf = flowOf;
  }

  get length(): number {
    return this.#length;
  }

  push(key: string): void {
    const flow = this.#flowOf(key);
    let queue = this.#flows.get(flow);
    if (queue === undefined) {
      queue = new Fifo<string>();
      this.#flows.set(flow, queue);
      this.#turns.push(flow);
    }
    queue.push(key);
    this.#length += 1;
  }

  shift(): string | undefined {
    const flow = this.#turns.shift();
    if (flow === undefined) return undefined;
    const queue = this.#flows.get(flow);
    const key = queue?.shift();
    if (queue === undefined || key === undefined) return undefined;
    this.#length -= 1;
    // A drained flow is forgotten, so an idle namespace holds nothing; one with more goes to the back.
    if (queue.length === 0) this.#flows.delete(flow);
    else this.#turns.push(flow);
    return key;
  }

  clear(): void {
    this.#flows.clear();
    this.#turns.clear();
    this.#length = 0;
  }
}

/** The flow of an object key "namespace/name": its namespace ("" for cluster-scoped keys). */
export function namespaceOf(key: string): string {
  const slash = key.indexOf('/');
  return slash < 0 ? '' : key.slice(0, slash);
}
