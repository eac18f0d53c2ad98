/**
 * Group commit: writes to one key (a project) that must be stored one transaction at a time are
 * stored in groups instead. The first write of a key is stored at once; writes arriving while its
 * transaction runs wait and then go together, in arrival order, as the key's next group, and so on
 * until none is waiting. One transaction then carries many writes, so a key's throughput grows
 * with its load instead of being one commit per write, and no write waits for more than the group
 * before it and its own.
 *
 * Invariants:
 * - per key, one group is stored at a time, in this process; groups of different keys run at once;
 * - a group's items are those waiting when it starts, in arrival order, at most `maxWeight` of
 *   weight (one item heavier than that goes alone), so a transaction's size is bounded;
 * - one item cannot fail another: `store` answers an outcome per item, and when it throws for a
 *   group of several, each item is stored again on its own, so the failure stays with its cause.
 */

export type Outcome<R> = { ok: true; value: R } | { ok: false; error: unknown };

interface Waiting<T, R> {
  item: T;
  resolve(value: R): void;
  reject(error: unknown): void;
}

export class GroupCommit<T, R> {
  /** The items waiting, by key; a key is present while its groups are being stored. */
  private readonly queues = new Map<string, Waiting<T, R>[]>();

  constructor(
    /** Stores a group in one transaction; answers one outcome per item, in order. */
    private readonly store: (items: T[]) => Promise<Outcome<R>[]>,
    private readonly weight: (item: T) => number,
    private readonly maxWeight: number,
  ) {}

  /** Stores `item` with the key's next group; settles once that group's transaction has ended. */
  submit(key: string, item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const queue = this.queues.get(key);
      if (queue) {
        queue.push({ item, resolve, reject });
        return;
      }
      this.queues.set(key, [{ item, resolve, reject }]);
      void this.drain(key);
    });
  }

  private async drain(key: string): Promise<void> {
    const queue = this.queues.get(key)!;
    while (queue.length > 0) await this.storeGroup(this.takeGroup(queue));
    // Nothing can be pushed between the loop's last check and here: both run without an await between them.
    this.queues.delete(key);
  }

  private takeGroup(queue: Waiting<T, R>[]): Waiting<T, R>[] {
    let total = this.weight(queue[0]!.item);
    let count = 1;
    while (count < queue.length) {
      const next = this.weight(queue[count]!.item);
      if (total + next > this.maxWeight) break;
      total += next;
      count += 1;
    }
    return queue.splice(0, count);
  }

  /** Never throws: every item of the group is settled. */
  private async storeGroup(group: Waiting<T, R>[]): Promise<void> {
    let outcomes: Outcome<R>[];
    try {
      outcomes = await this.store(group.map((waiting) => waiting.item));
    } catch (error) {
      if (group.length === 1) {
        group[0]!.reject(error);
        return;
      }
      for (const waiting of group) await this.storeGroup([waiting]);
      return;
    }
    group.forEach((waiting, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) waiting.resolve(outcome.value);
      else waiting.reject(outcome.error);
    });
  }
}
