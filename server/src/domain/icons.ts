/**
 * The icon store's rows (storage/icons.ts `IconRows`): one per stored icon, holding its bytes when
 * the database is the store, and what pruning decides on whichever store holds the bytes.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { deleteUnreferencedIcons, iconBytes, recordIcon, releaseIcons } from '../db/repositories/icons-rows.js';
import type { Icon, IconRows, PruneOptions } from '../storage/icons.js';
import { inBatches } from './retention.js';
import { transaction } from '../db/transaction.js';

export class DatabaseIconRows implements IconRows {
  /** `fork` gives an entity manager of its own for each use outside a caller's transaction. */
  constructor(private readonly fork: () => EntityManager) {}

  record(tx: EntityManager, icon: Icon, withBytes: boolean): Promise<void> {
    return recordIcon(tx, icon.sha256, icon.bytes.length, withBytes ? icon.bytes : null, icon.sender ?? null);
  }

  release(tx: EntityManager, sender: string, keep: string): Promise<string[]> {
    return releaseIcons(tx, sender, keep);
  }

  async bytes(key: string): Promise<Buffer | undefined> {
    return (await iconBytes(this.fork(), key)) ?? undefined;
  }

  async prune(options: PruneOptions, removing?: (keys: string[]) => Promise<void>): Promise<string[]> {
    const removed: string[] = [];
    const deleteBatch = async (em: EntityManager, limit: number) => {
      const keys = await deleteUnreferencedIcons(em, options.graceMs, limit);
      if (removing && keys.length > 0) await removing(keys);
      return keys;
    };
    await inBatches(async (limit) => {
      // Alone, the statement is its own transaction; with `removing`, the rows stay locked until it is done.
      const keys = removing ? await transaction(this.fork(), (tx) => deleteBatch(tx, limit)) : await deleteBatch(this.fork(), limit);
      removed.push(...keys);
      return keys.length;
    }, options);
    return removed;
  }

  transaction<T>(work: (tx: EntityManager) => Promise<T>): Promise<T> {
    return transaction(this.fork(), work);
  }
}
