/**
 * The hostile-input screen on its own (server/src/http/hostile-input.ts): what no request may hold,
 * whatever the contract says of a field. tests/contract/hostile-input.test.ts sends the same
 * requests over HTTP and checks the 400s and that nothing was stored; this pins down the pure rules.
 */
import { expect } from 'chai';
import { isStorableDateTime, MAX_DEPTH, screen, unstorable } from '../../server/src/http/hostile-input.js';
import { MAX_DETAILS } from '../../server/src/http/validation-errors.js';

/** An array nesting `levels` arrays inside it, the innermost empty. */
function nested(levels: number): unknown {
  let value: unknown = [];
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

describe('unit: hostile-input screen', () => {
  it('a clean request passes, and every value is counted', () => {
    const body = { name: 'Signups ✓ 📈', value: 12.5, tags: { plan: 'pro', seats: 3, trial: false, none: null }, list: [1, 'two'] };
    const { problems, values } = screen([
      ['path', { namespace: 'acme' }],
      ['query', { limit: '10' }],
      ['headers', { 'content-type': 'application/json' }],
      ['body', body],
    ]);
    expect(problems).to.deep.equal([]);
    // The 4 parts, 3 parameters, and in the body 4 fields, 4 tags and 2 list items.
    expect(values).to.equal(4 + 3 + 4 + 4 + 2);
  });

  it('NUL is refused in a value and in a field name, wherever it is', () => {
    const { problems } = screen([
      ['query', { q: 'a\u0000b' }],
      ['body', { nested: { deeper: ['ok', 'x\u0000'] }, 'bad\u0000key': 1 }],
    ]);
    expect(problems).to.have.deep.members([
      { path: '/query/q', message: 'must not contain NUL characters' },
      { path: '/body/nested/deeper/1', message: 'must not contain NUL characters' },
      { path: '/body/bad\u0000key', message: 'is a field name with a NUL character or an unpaired surrogate' },
    ]);
    expect(unstorable('a\u0000')).to.equal('must not contain NUL characters');
  });

  it('a lone surrogate is refused, a pair is not', () => {
    expect(unstorable('\ud83d\udcc8')).to.equal(undefined);
    for (const lone of ['\ud83d', 'a\udcc8b', 'end\ud83d']) expect(unstorable(lone)).to.equal('must not contain unpaired surrogates');
    const { problems } = screen([['body', { name: 'x\ud800', ['k\udfff']: 'ok' }]]);
    expect(problems).to.have.deep.members([
      { path: '/body/name', message: 'must not contain unpaired surrogates' },
      { path: '/body/k\udfff', message: 'is a field name with a NUL character or an unpaired surrogate' },
    ]);
  });

  it('1e309, which JSON can spell and JavaScript cannot hold, is refused', () => {
    const body = JSON.parse('{"value": 1e309, "small": -1e309, "fine": 1e308}') as unknown;
    const { problems } = screen([['body', body]]);
    expect(problems).to.have.deep.members([
      { path: '/body/value', message: 'is a number too large to hold' },
      { path: '/body/small', message: 'is a number too large to hold' },
    ]);
  });

  it(`nesting deeper than ${MAX_DEPTH} levels is refused, ${MAX_DEPTH} is not`, () => {
    expect(screen([['body', nested(MAX_DEPTH)]]).problems).to.deep.equal([]);
    const { problems } = screen([['body', nested(MAX_DEPTH + 1)]]);
    expect(problems).to.deep.equal([{ path: `/body${'/0'.repeat(MAX_DEPTH + 1)}`, message: `nests deeper than ${MAX_DEPTH} levels` }]);
    // Deeper still, the walk stops at the first level too deep: one problem, however deep the body.
    expect(screen([['body', nested(100_000)]]).problems).to.have.length(1);
  });

  it(`lists at most ${MAX_DETAILS} problems, and escapes field names in their pointers`, () => {
    const many = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`a/b~${i}`, '\u0000']));
    const { problems } = screen([['body', many]]);
    expect(problems).to.have.length(MAX_DETAILS);
    expect(problems[0]!.path).to.equal('/body/a~1b~00');
  });

  it('impossible date-times are refused: a leap second, year 0000, an offset past year 9999, 30 February', () => {
    for (const fine of ['2026-11-24T13:36:45Z', '2024-02-29T00:00:00.123+02:00', '0001-01-01T00:00:00Z', '9999-12-31T23:59:59.999Z']) {
      expect(isStorableDateTime(fine), fine).to.equal(true);
    }
    for (const impossible of [
      '2016-12-31T23:59:60Z',
      '0000-01-01T00:00:00Z',
      '9999-12-31T23:59:59-01:00',
      '0001-01-01T00:00:00+01:00',
      '2023-02-29T00:00:00Z',
      '2026-02-30T00:00:00Z',
      '2026-11-24 13:36:45',
      'not a date',
    ]) {
      expect(isStorableDateTime(impossible), impossible).to.equal(false);
    }
  });
});
