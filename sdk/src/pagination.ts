/**
 * What a list method answers: every item, page after page, as an async iterable
 * (`for await (const project of client.projects.list())`), one page (`await list.page()`), or the
 * pages one by one (`list.pages()`). Nothing is fetched until one is used, and each use starts at
 * the query's `cursor` (the first page when there is none), `limit` items a page. The call's
 * `signal` ends a walk as it ends a call: with a SignalboardAbortError at the next step (a page
 * being fetched, or the next page or item to be handed out), however many items are left.
 */
import type { Page } from './contract.js';
import { SignalboardError } from './errors.js';
import { throwIfAborted } from './http.js';
import type { SignalboardPromise } from './response.js';

export class Paginated<P extends Page> implements AsyncIterable<P['items'][number]> {
  constructor(
    private readonly fetchPage: (cursor: string | undefined) => SignalboardPromise<P>,
    private readonly cursor: string | undefined,
    private readonly signal: AbortSignal | undefined,
  ) {}

  /**
   * One page: `items`, and `next_cursor` to pass as `cursor` for the next (null on the last);
   * `.page().withResponse()` adds the answer's head.
   */
  page(): SignalboardPromise<P> {
    return this.fetchPage(this.cursor);
  }

  /** The pages, up to the last. */
  async *pages(): AsyncGenerator<P, void, undefined> {
    let cursor = this.cursor;
    for (;;) {
      const page = await this.fetchPage(cursor);
      throwIfAborted(this.signal);
      yield page;
      if (page.next_cursor === null) return;
      // A cursor that does not move would page forever.
      if (page.next_cursor === cursor)
        throw new SignalboardError(`The service answered the same next_cursor twice (${cursor}).`, { code: 'unexpected_response' });
      cursor = page.next_cursor;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<P['items'][number], void, undefined> {
    for await (const page of this.pages())
      for (const item of page.items as P['items'][number][]) {
        throwIfAborted(this.signal);
        yield item;
      }
  }
}
