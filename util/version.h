// The release version of every Stoker binary and library (the one place it
// is written; deploy/package.py reads it from here for the bundle and the
// wheel, and the Python package asks libstoker.so for it).
#ifndef STOKER_UTIL_VERSION_H_
#define STOKER_UTIL_VERSION_H_

#define STOKER_VERSION_STRING "0.2.0"

namespace stoker {
inline constexpr char kVersion[] = STOKER_VERSION_STRING;
// How this binary was compiled, for --version.
inline constexpr char kBuildType[] =
#ifdef NDEBUG
    "release build, optimized";
#elif defined(__OPTIMIZE__)
    "optimized build with assertions";
#else
    "debug build";
#endif
}  // namespace stoker

#endif  // STOKER_UTIL_VERSION_H_
