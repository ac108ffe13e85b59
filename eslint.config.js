// Lint: typescript-eslint's strict, type-aware rules (they read the type checker, so they see what strict
// TypeScript alone cannot: floating promises, unsafe values flowing in from untyped data, needless
// conditions). Deviations from the presets are listed with why.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'bench/results/**', 'node_modules/**'] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  ...tseslint.configs.stylisticTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // Numbers and booleans print unambiguously; objects, undefined and null in messages are what this catches.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      // Parsed JSON and label maps are index signatures: obj['key'] says "may be absent" (noUncheckedIndexedAccess).
      '@typescript-eslint/dot-notation': ['error', { allowIndexSignaturePropertyAccess: true }],
      // @kubernetes/client-node's models are plain data classes; object literals are how they are built.
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
      // An empty string is "not set" in kubeconfigs and the environment: `||` says so on purpose.
      '@typescript-eslint/prefer-nullish-coalescing': ['error', { ignorePrimitives: { string: true } }],
      // `() => resolve()` in callbacks is idiomatic; returning a void call from a block body is still flagged.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true }],
    },
  },
  {
    // Tests: fakes implement async ports without awaiting, and assert on values they just checked exist.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/unbound-method': 'off',
      '@typescript-eslint/no-empty-function': 'off',
    },
  },
  { files: ['**/*.js', '**/*.mjs'], ...tseslint.configs.disableTypeChecked },
);
