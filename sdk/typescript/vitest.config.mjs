export default {
  test: {
    include: ["test/**/*.vitest.test.ts", "examples/**/*.test.ts"],
    testTimeout: 60000,
    hookTimeout: 60000,
  },
};
