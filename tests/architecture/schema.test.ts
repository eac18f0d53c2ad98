/**
 * The entities (server/src/db/entities.ts) and the migrations (server/src/db/migrations/) describe
 * the same tables twice: MikroORM reads and writes through the first, the database is made by the
 * second. This compares them on the run's database, freshly migrated: for every entity, its table,
 * and each column's name, type and nullability, both ways (a column in the entity and not the table,
 * or in the table and not the entity, fails with its name). Tables no entity maps (the ones only
 * hand-written SQL reaches) are not compared.
 */
import { expect } from 'chai';
import { ReferenceKind, type EntityMetadata } from '@mikro-orm/core';
import { database, sql } from '../support/harness.js';

/** A column as both sides are compared: `table.column type [null]`. */
type Column = string;

// MikroORM's spelling of a column type, as PostgreSQL's format_type() writes it.
const PG_NAMES: Record<string, string> = {
  timestamptz: 'timestamp with time zone',
  int: 'integer',
  int4: 'integer',
  int8: 'bigint',
  bool: 'boolean',
  varchar: 'character varying',
  char: 'character',
};

function pgType(entityType: string): string {
  const match = /^(\w+)(\(\d+(?:,\s*\d+)?\))?(\[\])?$/.exec(entityType.trim().toLowerCase());
  if (!match) return entityType;
  const [, name, size = '', array = ''] = match;
  return `${PG_NAMES[name!] ?? name}${size}${array}`;
}

/** The columns an entity maps: its scalars, and the foreign keys of the relations it owns. */
function entityColumns(meta: EntityMetadata): Column[] {
  return meta.props
    .filter(
      (prop) =>
        prop.persist !== false &&
        (prop.kind === ReferenceKind.SCALAR ||
          prop.kind === ReferenceKind.MANY_TO_ONE ||
          (prop.kind === ReferenceKind.ONE_TO_ONE && prop.owner)),
    )
    .flatMap((prop) =>
      prop.fieldNames.map((field, i) => {
        // An enum is stored as text (a check constraint keeps its values).
        const type = prop.enum ? 'text' : pgType(prop.columnTypes[i]!);
        return `${meta.tableName}.${field} ${type}${prop.nullable && !prop.primary ? ' null' : ''}`;
      }),
    );
}

describe('architecture: the entities and the migrations describe the same tables', () => {
  it('every entity has its table, with the same columns, types and nullability', async () => {
    const metas = Object.values(database().orm.getMetadata().getAll()).filter(
      (meta) => !meta.embeddable && !meta.virtual && meta.tableName,
    );
    expect(metas.length, 'the entities of entities.ts').to.be.at.least(13);
    const tables = metas.map((meta) => meta.tableName);
    const rows = await sql<{ table_name: string; column_name: string; type: string; nullable: boolean }>(
      `select c.table_name, c.column_name, format_type(a.atttypid, a.atttypmod) as type, c.is_nullable = 'YES' as nullable
       from information_schema.columns c
       join pg_attribute a on a.attrelid = format('%I.%I', c.table_schema, c.table_name)::regclass and a.attname = c.column_name
       where c.table_schema = current_schema()`,
    );
    const migrated = rows
      .filter((r) => tables.includes(r.table_name))
      .map((r) => `${r.table_name}.${r.column_name} ${r.type}${r.nullable ? ' null' : ''}`);
    const mapped = metas.flatMap(entityColumns);
    const missingTables = tables.filter((table) => !rows.some((r) => r.table_name === table));
    expect(missingTables, 'entities whose table no migration creates').to.deep.equal([]);
    expect(
      {
        'in the entities, not as such in the migrated database': mapped.filter((c) => !migrated.includes(c)).sort(),
        'in the migrated database, not as such in the entities': migrated.filter((c) => !mapped.includes(c)).sort(),
      },
      'entities.ts and the migrations differ',
    ).to.deep.equal({
      'in the entities, not as such in the migrated database': [],
      'in the migrated database, not as such in the entities': [],
    });
  });
});
