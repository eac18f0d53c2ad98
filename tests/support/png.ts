/** The tests build their icons with the conformance suite's PNG encoder (good, huge or broken images). */
export * from '../../tools/src/conformance/png.js';
