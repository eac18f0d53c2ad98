/**
 * Group commit (server/src/domain/group-commit.ts), on its own: which writes share a transaction,
 * in what order, how big a group may get, and that one write's failure stays its own.
 */
import { expect } from 'chai';
import { GroupCommit, type Outcome } from '../../server/src/domain/group-commit.js';

interface Write {
  name: string;
  weight?: number;
}

/** A store that records each group and holds it until released, answering every item with its name. */
function recordingStore(fail?: (group: Write[]) => Error | undefined) {
  const groups: string[][] = [];
  const held: (() => void)[] = [];
  const store = async (items: Write[]): Promise<Outcome<string>[]> => {
    groups.push(items.map((item) => item.name));
    await new Promise<void>((resolve) => held.push(resolve));
    const error = fail?.(items);
    if (error !== undefined) throw error;
    return items.map((item) =>
      item.name.startsWith('refused') ? { ok: false, error: new Error(item.name) } : { ok: true, value: item.name },
    );
  };
  /** Lets the oldest held group finish, then waits for what that sets going. */
  const release = async () => {
    held.shift()!();
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { groups, store, release, held };
}

const settled = (promise: Promise<string>) =>
  promise.then(
    (value) => `ok ${value}`,
    (error: Error) => `failed ${error.message}`,
  );

describe('group commit', () => {
  it('stores the first write at once and the writes that arrive meanwhile together, in arrival order, as the next group', async () => {
    const { groups, store, release } = recordingStore();
    const commit = new GroupCommit<Write, string>(store, () => 1, 100);
    const first = commit.submit('p', { name: 'a' });
    const rest = ['b', 'c', 'd'].map((name) => commit.submit('p', { name }));
    expect(groups).to.deep.equal([['a']]);
    await release();
    expect(groups).to.deep.equal([['a'], ['b', 'c', 'd']]);
    await release();
    expect(await Promise.all([first, ...rest])).to.deep.equal(['a', 'b', 'c', 'd']);
  });

  it('runs the groups of different keys at once, and each key one group at a time', async () => {
    const { groups, store, release, held } = recordingStore();
    const commit = new GroupCommit<Write, string>(store, () => 1, 100);
    const all = [commit.submit('p', { name: 'p1' }), commit.submit('q', { name: 'q1' }), commit.submit('p', { name: 'p2' })];
    expect(groups).to.deep.equal([['p1'], ['q1']]);
    expect(held).to.have.length(2);
    await release();
    expect(groups).to.deep.equal([['p1'], ['q1'], ['p2']]);
    await release();
    await release();
    expect(await Promise.all(all)).to.deep.equal(['p1', 'q1', 'p2']);
  });

  it('bounds a group by weight, keeping arrival order; a write heavier than the bound goes alone', async () => {
    const { groups, store, release } = recordingStore();
    const commit = new GroupCommit<Write, string>(store, (write) => write.weight ?? 1, 10);
    const all = [
      commit.submit('p', { name: 'first' }),
      commit.submit('p', { name: 'six', weight: 6 }),
      commit.submit('p', { name: 'four', weight: 4 }),
      commit.submit('p', { name: 'one' }),
      commit.submit('p', { name: 'huge', weight: 50 }),
      commit.submit('p', { name: 'last' }),
    ];
    for (let i = 0; i < 4; i++) await release();
    await release();
    expect(groups).to.deep.equal([['first'], ['six', 'four'], ['one'], ['huge'], ['last']]);
    expect(await Promise.all(all)).to.deep.equal(['first', 'six', 'four', 'one', 'huge', 'last']);
  });

  it('gives each write its own outcome: a refused one fails alone, the others of its group are stored', async () => {
    const { store, release } = recordingStore();
    const commit = new GroupCommit<Write, string>(store, () => 1, 100);
    const first = settled(commit.submit('p', { name: 'a' }));
    const group = ['b', 'refused c', 'd'].map((name) => settled(commit.submit('p', { name })));
    await release();
    await release();
    expect(await Promise.all([first, ...group])).to.deep.equal(['ok a', 'ok b', 'failed refused c', 'ok d']);
  });

  it('when a group fails as a whole, stores each of its writes again on its own, so the failure stays with the write that causes it', async () => {
    const poison = new Error('poisoned');
    const { groups, store, release, held } = recordingStore((items) => (items.some((item) => item.name === 'poison') ? poison : undefined));
    const commit = new GroupCommit<Write, string>(store, () => 1, 100);
    const first = settled(commit.submit('p', { name: 'a' }));
    const group = ['b', 'poison', 'c'].map((name) => settled(commit.submit('p', { name })));
    while (held.length > 0) await release();
    expect(await Promise.all([first, ...group])).to.deep.equal(['ok a', 'ok b', 'failed poisoned', 'ok c']);
    expect(groups).to.deep.equal([['a'], ['b', 'poison', 'c'], ['b'], ['poison'], ['c']]);
  });

  it('keeps taking writes for a key after it has been idle', async () => {
    const { store, release } = recordingStore();
    const commit = new GroupCommit<Write, string>(store, () => 1, 100);
    const first = commit.submit('p', { name: 'a' });
    await release();
    expect(await first).to.equal('a');
    const second = commit.submit('p', { name: 'b' });
    await release();
    expect(await second).to.equal('b');
  });
});
