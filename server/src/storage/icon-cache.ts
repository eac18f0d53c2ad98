/**
 * The icons this instance served lately, in memory, least recently used out first, bounded by the
 * bytes it holds. A key's bytes never change (the key is their hash), so an entry is never stale:
 * one is dropped only to make room, or when the icon is pruned.
 */
export class IconCache {
  /** In order of use, the least recent first (a Map iterates in insertion order). */
  private readonly entries = new Map<string, Buffer>();
  private held = 0;

  constructor(private readonly maxBytes: number) {}

  /** Bytes held now: never more than `maxBytes`. */
  get bytes(): number {
    return this.held;
  }

  get(key: string): Buffer | undefined {
    const bytes = this.entries.get(key);
    if (bytes !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, bytes);
    }
    return bytes;
  }

  /** Keeps `bytes` under `key`, dropping the least recently used entries to make room; larger than the whole cache: not kept. */
  set(key: string, bytes: Buffer): void {
    this.delete(key);
    if (bytes.length > this.maxBytes) return;
    for (const [oldest, old] of this.entries) {
      if (this.held + bytes.length <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.held -= old.length;
    }
    this.entries.set(key, bytes);
    this.held += bytes.length;
  }

  delete(key: string): void {
    const bytes = this.entries.get(key);
    if (bytes === undefined) return;
    this.entries.delete(key);
    this.held -= bytes.length;
  }
}
