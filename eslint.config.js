// ESLint flat config: typescript-eslint's recommended type-checked rules, and the server's layers.
// CI knows no warnings: every rule here is an error or off.
//
// The layers of server/src point one way: http → handlers → domain → db.
// - The database is reached in db/ only: only db/** imports the database drivers (pg, knex,
//   @mikro-orm/knex, @electric-sql/pglite), db/raw.ts (the SQL executor) and db/repositories/**,
//   only db/** calls execute / getConnection / getKnex / createQueryBuilder or imports MikroORM's
//   raw / sql helpers, and only db/** touches a member of an entity manager (a type-aware rule,
//   below). The one exception: domain/** calls the repositories of db/repositories/**.
// - db/** imports nothing from the layers above it (domain, handlers, http, policies, presenters,
//   services.ts) nor from live/, storage/, billing/, operator/, maintenance/ or the entry points.
// - domain/** may import errors.ts, config.ts (types only: settings come in as arguments),
//   db/entities, db/orm, db/repositories, storage/, billing/ and the pure policies/; nothing from
//   handlers, http, presenters, services.ts, live/, operator/, maintenance/ or the entry points
//   (live/ and services.ts call the domain, so the reverse would make a cycle).
// - handlers/** import from http/ only http/handler-types.ts.
// - policies/** are pure: values only from errors.ts (and other policies), types from anywhere.
// - presenters/** only shape answers: nothing from handlers, http, services.ts, live/ and the like.
// - webhooks/** is domain-level code for webhooks (endpoints, deliveries, the deliverer, the SSRF
//   guard, their messages and presenters): like domain/** it may call the repositories (its SQL is
//   db/repositories/webhook-outbox.ts), and it may use domain/ and presenters/; domain/** does not import
//   it back. Every other folder imports it through webhooks/index.ts only.
// - The server imports neither the SDK nor the tools, and the SDK not the server: contract types
//   come from spec/generated/openapi.ts. The tools check a deployment from outside.
//
// The rules read import specifiers as written. Imports between the folders of server/src are
// relative ('../db/raw.js'), so each pattern below matches a relative specifier that ends in that
// module or passes through that folder, however deep the importing file is. no-restricted-imports
// does not see import(), so server/src imports its own modules statically (no-restricted-syntax
// says so) and the database drivers are refused in import() too.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

const SQL_HOME = 'SQL lives in server/src/db/: call a repository of server/src/db/repositories from the domain, or a domain function.';

/** A relative specifier that reaches one of these modules or folders (`name`, `name.js`, `name/…`). */
const relative = (...names) => `^\\.\\.?/(.*/)?(${names.join('|')})(/|\\.js$|$)`;

/** @param {string} regex @param {string} message @param {boolean} [allowTypeImports] */
const forbid = (regex, message, allowTypeImports = false) => ({ regex, message, ...(allowTypeImports ? { allowTypeImports } : {}) });

const DRIVERS = forbid(
  '^(pg|knex|@mikro-orm/knex|@electric-sql/pglite)(/|$)',
  `Database drivers are used in server/src/db/ only. ${SQL_HOME}`,
);
const RAW = forbid(relative('db/raw'), `db/raw.ts (the SQL executor) is used in server/src/db/ only. ${SQL_HOME}`);
const RAW_SQL_HELPERS = {
  regex: '^@mikro-orm/',
  importNames: ['raw', 'sql'],
  message: `Raw SQL fragments are written in server/src/db/ only. ${SQL_HOME}`,
};
const QUERIES = forbid(
  relative('db/repositories'),
  'The repositories of server/src/db are called by server/src/domain/ only: go through a domain function.',
);
const WEBHOOKS_INSIDE = forbid(
  '^\\.\\.?/(.*/)?webhooks/(?!index(\\.js)?$)',
  'server/src/webhooks/ is imported through webhooks/index.ts only: export what is needed there.',
);
const NO_SDK = forbid(
  `${relative('sdk', 'tools')}|^@signalboard/`,
  'The server imports neither the SDK nor the tools: contract types come from spec/generated/openapi.ts.',
);

/** Every folder of server/src but db/, which may use all of these. */
const OUTSIDE_DB = [NO_SDK, DRIVERS, RAW, RAW_SQL_HELPERS, WEBHOOKS_INSIDE];

const LAYERS = {
  db: [
    NO_SDK,
    forbid(
      relative(
        'domain',
        'handlers',
        'http',
        'policies',
        'presenters',
        'services',
        'live',
        'storage',
        'billing',
        'operator',
        'maintenance',
        'webhooks',
        'app',
        'server',
        'main',
      ),
      'server/src/db/ is the bottom layer: it imports nothing from the layers above it (domain, handlers, http, policies, presenters, services.ts, …).',
    ),
  ],
  domain: [
    ...OUTSIDE_DB,
    forbid(
      relative('handlers', 'http', 'presenters', 'services', 'live', 'operator', 'maintenance', 'app', 'server', 'main'),
      'server/src/domain/ is called by the handlers: it imports nothing from handlers, http, presenters, services.ts, live, operator or maintenance.',
    ),
    forbid(
      '^\\.\\./webhooks(/|$)',
      'server/src/webhooks/ calls the domain, not the reverse: a type both need moves down into domain/ (as domain/change-shapes.ts).',
    ),
    forbid(
      relative('config'),
      'server/src/domain/ takes its settings as arguments: import only types from config.ts (`import type`).',
      true,
    ),
  ],
  handlers: [
    ...OUTSIDE_DB,
    QUERIES,
    forbid('^\\.\\.?/(.*/)?http/(?!handler-types(\\.js)?$)', 'Handlers import nothing from server/src/http/ but http/handler-types.ts.'),
  ],
  policies: [
    ...OUTSIDE_DB,
    QUERIES,
    forbid(
      '^(?!\\.\\./errors(\\.js)?$|\\./)',
      'server/src/policies/ are pure: they import values only from errors.ts, and types with `import type`. Load what they judge in the domain and pass it in.',
      true,
    ),
  ],
  presenters: [
    ...OUTSIDE_DB,
    QUERIES,
    forbid(
      relative('handlers', 'http', 'services', 'live', 'operator', 'maintenance', 'app', 'server', 'main'),
      'server/src/presenters/ only shape answers: they import nothing from handlers, http, services.ts, live, operator or maintenance.',
    ),
  ],
  webhooks: [
    ...OUTSIDE_DB,
    forbid(
      relative('handlers', 'http', 'services', 'live', 'operator', 'maintenance', 'app', 'server', 'main'),
      'server/src/webhooks/ is domain-level code: it imports nothing from handlers, http, services.ts, live, operator or maintenance.',
    ),
    forbid(
      relative('config'),
      'server/src/webhooks/ takes its settings as arguments: import only types from config.ts (`import type`).',
      true,
    ),
  ],
  // http/, live/, storage/, billing/, operator/, maintenance/ and the files at the root of server/src.
  rest: [...OUTSIDE_DB, QUERIES],
};

const DYNAMIC_IMPORTS = [
  {
    selector: "ImportExpression[source.type!='Literal']",
    message: 'import() in server/src takes a string literal, so that the layer rules can check it.',
  },
  {
    selector: 'ImportExpression[source.value=/^\\./]',
    message: 'Import the modules of server/src statically: the layer rules (no-restricted-imports) do not see import().',
  },
];
const OUTSIDE_DB_SYNTAX = [
  ...DYNAMIC_IMPORTS,
  {
    selector: 'ImportExpression[source.value=/^(pg|knex|@mikro-orm\\/knex|@electric-sql\\/pglite)(\\/|$)/]',
    message: `Database drivers are used in server/src/db/ only. ${SQL_HOME}`,
  },
  { selector: 'CallExpression[callee.property.name=/^(execute|getConnection|getKnex|createQueryBuilder)$/]', message: SQL_HOME },
];

// A later entry replaces the options of the same rule in earlier ones: each entry lists its full set.
const layer = (name, files, patterns, syntax = OUTSIDE_DB_SYNTAX) => ({
  name: `signalboard/layers/${name}`,
  files,
  rules: {
    '@typescript-eslint/no-restricted-imports': ['error', { patterns }],
    'no-restricted-syntax': ['error', ...syntax],
  },
});

/**
 * The entity manager is MikroORM's door to the database, so only server/src/db/ opens it: any use
 * of a member of an EntityManager (find, create, flush, nativeUpdate, fork, transactional, …)
 * outside db/ is an error. Code above db/ may hold one and pass it on (to a repository, to
 * `transaction`), which is how a request's unit of work reaches the database. Type-aware, so it
 * sees the entity manager whatever the variable is called.
 */
const entityManagerInDbOnly = {
  meta: {
    type: 'problem',
    schema: [],
    messages: { outside: 'The entity manager is used in server/src/db/ only: call a repository of server/src/db/repositories.' },
  },
  create(context) {
    const services = context.sourceCode.parserServices;
    const checker = services.program.getTypeChecker();
    return {
      MemberExpression(node) {
        const type = checker.getTypeAtLocation(services.esTreeNodeToTSNodeMap.get(node.object));
        const name = (type.aliasSymbol ?? type.getSymbol())?.getName() ?? '';
        if (/EntityManager$/.test(name)) context.report({ node, messageId: 'outside' });
      },
    };
  },
};

// Rules that read JSON answers as `any`: the tests, and the conformance suite (a black-box test of a deployment).
const JSON_ANSWERS_AS_ANY = {
  '@typescript-eslint/no-explicit-any': 'off',
  '@typescript-eslint/no-unsafe-argument': 'off',
  '@typescript-eslint/no-unsafe-assignment': 'off',
  '@typescript-eslint/no-unsafe-call': 'off',
  '@typescript-eslint/no-unsafe-member-access': 'off',
  '@typescript-eslint/no-unsafe-return': 'off',
};

export default defineConfig(
  {
    name: 'signalboard/ignores',
    // Generated and build output (node_modules/ is ignored by default).
    ignores: ['**/dist/', 'spec/generated/', 'bench/tmp/', 'data/', '.test-output/', 'conformance-report/', 'coverage/'],
  },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    name: 'signalboard/typescript',
    languageOptions: {
      // Each file is checked with the tsconfig.json nearest to it (sdk/ and tools/ have their own).
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
      // Off: with noUncheckedIndexedAccess, `rows[0]!` after a check the compiler cannot follow is deliberate.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Off: handlers and interface implementations are `async` to fit a Promise-returning type, with or without an await.
      '@typescript-eslint/require-await': 'off',
      // Off: the code types closures as method signatures (`close(): Promise<void>`) and destructures them on purpose;
      // the rule cannot tell those from prototype methods (every hit was a closure).
      '@typescript-eslint/unbound-method': 'off',
    },
  },
  { name: 'signalboard/js', files: ['**/*.{js,cjs}'], extends: [tseslint.configs.disableTypeChecked] },
  // mocha loads a reporter with require(): the suite's reporter is CommonJS.
  {
    name: 'signalboard/cjs',
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { ...globals.node } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  { name: 'signalboard/json-answers', files: ['tests/**/*.ts', 'tools/src/conformance/**/*.ts'], rules: JSON_ANSWERS_AS_ANY },
  {
    // The web console runs in browsers (its own tsconfig.json: DOM types, Preact's JSX); its build config runs in Node.
    name: 'signalboard/console',
    files: ['console/**/*.{ts,tsx}'],
    languageOptions: { globals: { ...globals.browser } },
  },
  { name: 'signalboard/console-build', files: ['console/vite.config.ts'], languageOptions: { globals: { ...globals.node } } },
  {
    name: 'signalboard/tests',
    files: ['tests/**/*.ts'],
    // Off: chai's property assertions (`.to.be.empty`) are expressions by design.
    rules: { '@typescript-eslint/no-unused-expressions': 'off' },
  },
  {
    name: 'signalboard/koa-middleware',
    files: ['server/src/http/**/*.ts'],
    // Off: Koa types next() as Promise<any>, and `return next()` is how a middleware passes a request on.
    rules: { '@typescript-eslint/no-unsafe-return': 'off' },
  },

  {
    name: 'signalboard/entity-manager',
    files: ['server/src/**/*.ts'],
    ignores: ['server/src/db/**'],
    plugins: { signalboard: { rules: { 'entity-manager-in-db-only': entityManagerInDbOnly } } },
    rules: { 'signalboard/entity-manager-in-db-only': 'error' },
  },

  // The server's layers (see the top of this file): the general entry first, then one per layer.
  layer('server', ['server/src/**/*.ts'], LAYERS.rest),
  layer('db', ['server/src/db/**/*.ts'], LAYERS.db, DYNAMIC_IMPORTS),
  layer('domain', ['server/src/domain/**/*.ts'], LAYERS.domain),
  layer('handlers', ['server/src/handlers/**/*.ts'], LAYERS.handlers),
  layer('policies', ['server/src/policies/**/*.ts'], LAYERS.policies, [
    ...OUTSIDE_DB_SYNTAX,
    { selector: 'ImportExpression', message: 'server/src/policies/ are pure: no import().' },
  ]),
  layer('presenters', ['server/src/presenters/**/*.ts'], LAYERS.presenters),
  layer('webhooks', ['server/src/webhooks/**/*.ts'], LAYERS.webhooks),

  {
    name: 'signalboard/sdk',
    files: ['sdk/src/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            forbid(
              `${relative('server', 'tools')}|^@signalboard/tools`,
              'The SDK imports neither the server nor the tools: contract types come from spec/generated/openapi.ts.',
            ),
          ],
        },
      ],
    },
  },
  {
    name: 'signalboard/tools',
    files: ['tools/src/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            forbid(
              `${relative('server')}|^@signalboard/sdk`,
              'The tools check a deployment from outside: they import neither the server nor the SDK.',
            ),
          ],
        },
      ],
    },
  },
);
