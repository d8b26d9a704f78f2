import type { Sql } from '../../src/db/connect';

// The schema of one database as text: what `pg_dump --schema-only` would show a reader, written
// from PostgreSQL's catalogs and its own deparsers (pg_get_functiondef, pg_get_constraintdef,
// pg_get_indexdef, pg_get_triggerdef, pg_get_viewdef: the functions pg_dump itself calls for
// these objects). pg_dump cannot be used: the embedded PostgreSQL the tests run on ships none,
// and a pg_dump refuses servers of a newer major version than its own.
//
// Schema public and the extensions. graphile-worker's schema is left out: the library creates and
// migrates it (runMigrations), and a new version of the library is not a change of ours. Owners
// and grants are left out as pg_dump --no-owner --no-privileges does: they belong to a deployment.
// Each kind of object is in name order, so the text depends only on the schema. Kinds of object
// that no migration makes yet are refused by name rather than left out unseen.
export async function schemaSnapshot(sql: Sql): Promise<string> {
  return sql.begin(async (tx) => {
    // As pg_dump does: every name outside pg_catalog comes out qualified by its schema.
    await tx`set local search_path = ''`;
    // As pg_dump does: an extension is written as its CREATE EXTENSION, not as the objects it made.
    const notAnExtensionMember = (catalog: string, oid: string) =>
      tx.unsafe(`not exists (select from pg_depend e where e.classid = '${catalog}'::regclass and e.objid = ${oid} and e.deptype = 'e')`);
    const unrendered = await tx<{ what: string }[]>`
      select 'schema ' || n.nspname as what from pg_namespace n
      where n.nspname not in ('public', 'graphile_worker', 'pg_catalog', 'information_schema', 'pg_toast')
        and n.nspname not like 'pg\_temp\_%' and n.nspname not like 'pg\_toast\_temp\_%'
      union all
      select format('relation %s of kind %s', c.oid::regclass, c.relkind) from pg_class c
      where c.relnamespace = 'public'::regnamespace and c.relkind not in ('r', 'i', 'S', 'v')
        and ${notAnExtensionMember('pg_class', 'c.oid')}
      union all
      select 'type ' || t.oid::regtype from pg_type t
      where t.typnamespace = 'public'::regnamespace and t.typtype in ('b', 'd', 'm', 'p', 'r')
        and t.typcategory <> 'A' and ${notAnExtensionMember('pg_type', 't.oid')}
      union all
      select 'aggregate or window function ' || p.oid::regprocedure from pg_proc p
      where p.pronamespace = 'public'::regnamespace and p.prokind in ('a', 'w')
        and ${notAnExtensionMember('pg_proc', 'p.oid')}
      union all
      select format('policy %s on %s', p.polname, p.polrelid::regclass) from pg_policy p
      union all
      select format('rule %s on %s', r.rulename, r.ev_class::regclass) from pg_rewrite r
      join pg_class c on c.oid = r.ev_class
      where c.relnamespace = 'public'::regnamespace and r.rulename <> '_RETURN'
      union all
      select 'row level security on ' || c.oid::regclass from pg_class c
      where c.relnamespace = 'public'::regnamespace and (c.relrowsecurity or c.relforcerowsecurity)
      union all
      select format('trigger %s on %s, not always enabled', t.tgname, t.tgrelid::regclass) from pg_trigger t
      join pg_class c on c.oid = t.tgrelid
      where c.relnamespace = 'public'::regnamespace and not t.tgisinternal and t.tgenabled <> 'O'
      union all
      select 'inheritance of ' || i.inhrelid::regclass from pg_inherits i
      join pg_class c on c.oid = i.inhrelid
      where c.relnamespace = 'public'::regnamespace
      union all
      select 'comment on ' || coalesce(c.oid::regclass::text, p.oid::regprocedure::text, t.oid::regtype::text) from pg_description d
      left join pg_class c on d.classoid = 'pg_class'::regclass and c.oid = d.objoid and c.relnamespace = 'public'::regnamespace
      left join pg_proc p on d.classoid = 'pg_proc'::regclass and p.oid = d.objoid and p.pronamespace = 'public'::regnamespace
      left join pg_type t on d.classoid = 'pg_type'::regclass and t.oid = d.objoid and t.typnamespace = 'public'::regnamespace
      where coalesce(c.oid, p.oid, t.oid) is not null
        and ${notAnExtensionMember('pg_class', 'c.oid')} and ${notAnExtensionMember('pg_proc', 'p.oid')}
        and ${notAnExtensionMember('pg_type', 't.oid')}
      order by what`;
    if (unrendered.length > 0) {
      const what = unrendered.map((r) => r.what).join('; ');
      throw new Error(`The schema snapshot does not write these yet: ${what}. Teach test/support/schema-snapshot.ts to.`);
    }

    // The extensions a migration made; like pg_dump, not those every database is made with
    // (plpgsql), whose ids are below the first one initdb leaves to users.
    const extensions = await tx<{ ddl: string }[]>`
      select format('CREATE EXTENSION %I WITH SCHEMA %I VERSION %L;', e.extname, n.nspname, e.extversion) as ddl
      from pg_extension e join pg_namespace n on n.oid = e.extnamespace
      where e.oid >= 16384
      order by e.extname`;

    const types = await tx<{ ddl: string }[]>`
      select format(E'CREATE TYPE %s AS ENUM (\n    %s\n);', t.oid::regtype,
               string_agg(quote_literal(e.enumlabel), E',\n    ' order by e.enumsortorder)) as ddl
      from pg_type t join pg_enum e on e.enumtypid = t.oid
      where t.typnamespace = 'public'::regnamespace
        and ${notAnExtensionMember('pg_type', 't.oid')}
      group by t.oid, t.typname
      order by t.typname`;

    const functions = await tx<{ ddl: string }[]>`
      select rtrim(pg_get_functiondef(p.oid), E'\n') || ';' as ddl
      from pg_proc p
      where p.pronamespace = 'public'::regnamespace and p.prokind in ('f', 'p')
        and ${notAnExtensionMember('pg_proc', 'p.oid')}
      order by p.proname, pg_get_function_identity_arguments(p.oid)`;

    // Sequences of their own; an identity column's sequence is written as its column, as
    // GENERATED … AS IDENTITY without the sequence's options.
    const sequences = await tx<{ ddl: string }[]>`
      select format('CREATE SEQUENCE %s AS %s START WITH %s INCREMENT BY %s MINVALUE %s MAXVALUE %s CACHE %s%s;',
               c.oid::regclass, s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache,
               case when s.seqcycle then ' CYCLE' else '' end) as ddl
      from pg_sequence s join pg_class c on c.oid = s.seqrelid
      where c.relnamespace = 'public'::regnamespace
        and ${notAnExtensionMember('pg_class', 'c.oid')}
        and not exists (select from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'i')
      order by c.relname`;

    const views = await tx<{ ddl: string }[]>`
      select format(E'CREATE VIEW %s AS\n%s', c.oid::regclass, pg_get_viewdef(c.oid, true)) as ddl
      from pg_class c
      where c.relnamespace = 'public'::regnamespace and c.relkind = 'v'
        and ${notAnExtensionMember('pg_class', 'c.oid')}
      order by c.relname`;

    const tables = await tx<{ oid: number; ddl: string; options: string | null }[]>`
      select c.oid,
             format('CREATE %sTABLE %s (', case when c.relpersistence = 'u' then 'UNLOGGED ' else '' end, c.oid::regclass) as ddl,
             array_to_string(c.reloptions, ', ') as options
      from pg_class c
      where c.relnamespace = 'public'::regnamespace and c.relkind = 'r'
        and ${notAnExtensionMember('pg_class', 'c.oid')}
      order by c.relname`;
    const tableTexts: string[] = [];
    for (const table of tables) {
      // Columns in their order in the table (what `select *` returns), then constraints by name.
      const columns = await tx<{ line: string }[]>`
        select format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod))
               || case when a.attcollation <> 0 and a.attcollation <> ty.typcollation
                    then ' COLLATE ' || a.attcollation::regcollation else '' end
               || case a.attidentity
                    when 'a' then ' GENERATED ALWAYS AS IDENTITY'
                    when 'd' then ' GENERATED BY DEFAULT AS IDENTITY'
                    else ''
                  end
               || case a.attgenerated
                    when 's' then ' GENERATED ALWAYS AS (' || pg_get_expr(d.adbin, d.adrelid) || ') STORED'
                    when 'v' then ' GENERATED ALWAYS AS (' || pg_get_expr(d.adbin, d.adrelid) || ') VIRTUAL'
                    else coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '')
                  end
               || case when a.attnotnull then ' NOT NULL' else '' end as line
        from pg_attribute a
        join pg_type ty on ty.oid = a.atttypid
        left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
        where a.attrelid = ${table.oid} and a.attnum > 0 and not a.attisdropped
        order by a.attnum`;
      // Not-null constraints (PostgreSQL 18 names them) are written on their columns.
      const constraints = await tx<{ line: string }[]>`
        select format('CONSTRAINT %I %s', k.conname, pg_get_constraintdef(k.oid)) as line
        from pg_constraint k
        where k.conrelid = ${table.oid} and k.contype <> 'n'
        order by k.conname`;
      // Indexes of their own; those of primary keys, unique and exclusion constraints are written
      // as the constraints.
      const indexes = await tx<{ ddl: string }[]>`
        select pg_get_indexdef(i.indexrelid) || ';' as ddl
        from pg_index i join pg_class c on c.oid = i.indexrelid
        where i.indrelid = ${table.oid}
          and not exists (select from pg_constraint k
                          where k.conrelid = i.indrelid and k.conindid = i.indexrelid and k.contype in ('p', 'u', 'x'))
        order by c.relname`;
      const triggers = await tx<{ ddl: string }[]>`
        select pg_get_triggerdef(t.oid) || ';' as ddl
        from pg_trigger t
        where t.tgrelid = ${table.oid} and not t.tgisinternal
        order by t.tgname`;
      const body = [...columns, ...constraints].map((r) => `    ${r.line}`).join(',\n');
      const withOptions = table.options ? ` WITH (${table.options})` : '';
      const create = `${table.ddl}\n${body}\n)${withOptions};`;
      tableTexts.push([create, ...indexes.map((r) => r.ddl), ...triggers.map((r) => r.ddl)].join('\n'));
    }

    const sections: [string, string[]][] = [
      ['Extensions', extensions.map((r) => r.ddl)],
      ['Types', types.map((r) => r.ddl)],
      ['Functions', functions.map((r) => r.ddl)],
      ['Sequences', sequences.map((r) => r.ddl)],
      ['Tables, each with its indexes and triggers', tableTexts],
      ['Views', views.map((r) => r.ddl)],
    ];
    return sections
      .filter(([, texts]) => texts.length > 0)
      .map(([title, texts]) => `-- ${title}\n\n${texts.join('\n\n')}\n`)
      .join('\n');
  });
}
