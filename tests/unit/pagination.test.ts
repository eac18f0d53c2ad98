/**
 * Pagination on its own: cursors (db/page.ts) and the byte budget of a page (domain/pagination.ts).
 * The list routes' own tests walk real pages end to end; this pins down the pure rules.
 */
import { expect } from 'chai';
import { decodeCursor, encodeCursor } from '../../server/src/db/page.js';
import { pageRequest, PAGE_BYTES, toPage } from '../../server/src/domain/pagination.js';
import { ApiError } from '../../server/src/errors.js';

const ID = '01a21a4c-c268-770c-8370-08e1ea36752f';
const rows = (n: number, size = 10) =>
  Array.from({ length: n }, (_, i) => ({ id: ID.replace(/.$/, String(i % 10)), text: 'x'.repeat(size) }));

describe('unit: pagination', () => {
  it('a cursor is the last id seen, opaque, and reads back as that id', () => {
    const cursor = encodeCursor(ID);
    expect(cursor).to.not.include('-');
    expect(decodeCursor(cursor)).to.equal(ID);
    expect(decodeCursor(undefined)).to.equal(undefined);
  });

  it('a cursor the service did not issue is 400 invalid_request at /query/cursor', () => {
    for (const bad of ['', 'not a cursor', encodeCursor('not-an-id'), encodeCursor(`${ID}x`)]) {
      try {
        decodeCursor(bad);
        expect.fail(`accepted ${JSON.stringify(bad)}`);
      } catch (error) {
        expect(error).to.be.instanceOf(ApiError);
        expect((error as ApiError).status).to.equal(400);
        expect((error as ApiError).details?.[0]?.path).to.equal('/query/cursor');
      }
    }
  });

  it('a page holds `limit` items, and a next cursor exactly when a row beyond them was fetched', () => {
    const fetched = rows(4);
    const page = toPage(fetched, 3, (row) => row.id);
    expect(page.items).to.have.length(3);
    expect(page.next_cursor).to.equal(encodeCursor(fetched[2]!.id));
    expect(toPage(rows(3), 3, (row) => row.id).next_cursor).to.equal(null);
    expect(toPage([], 3, (row: { id: string }) => row.id)).to.deep.equal({ items: [], next_cursor: null });
  });

  it('stops before the byte budget, at least one item a page, and continues from the last item sent', () => {
    const big = rows(5, Math.floor(PAGE_BYTES / 2.5));
    const page = toPage(big, 5, (row) => row);
    expect(page.items).to.have.length(2);
    expect(page.next_cursor).to.equal(encodeCursor(big[1]!.id));
    expect(Buffer.byteLength(JSON.stringify(page.items))).to.be.at.most(PAGE_BYTES);
    const huge = rows(2, PAGE_BYTES * 2);
    expect(toPage(huge, 2, (row) => row).items).to.have.length(1);
  });

  it('takes the limit the contract defaulted, and refuses a query without one (a programming error)', () => {
    expect(pageRequest({ limit: 20, cursor: 'c' })).to.deep.equal({ limit: 20, cursor: 'c' });
    expect(() => pageRequest({})).to.throw('limit missing');
  });
});
