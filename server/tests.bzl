"""Unit tests of a server package: one small cc_test per test file."""

def cc_tests(tests, deps, size = "small"):
    """A cc_test `t`, built from `t.cc`, for each `t` in `tests`, on `deps`
    and gtest's main."""
    for t in tests:
        native.cc_test(
            name = t,
            size = size,
            srcs = [t + ".cc"],
            deps = deps + ["//third_party:gtest_main"],
        )
