// The release version of every Stoker binary and library (the one place it
// is written; deploy/package.py reads it from here for the bundle and the
// wheel, and the Python package asks libstoker.so for it).
#ifndef STOKER_UTIL_VERSION_H_
#define STOKER_UTIL_VERSION_H_

#define STOKER_VERSION_STRING "0.2.0"

namespace stoker {
inline constexpr char kVersion[] = STOKER_VERSION_STRING;
// The session protocol between clients and stokerd, exchanged at connect
// (DaemonStats.protocol, OpenSessionRequest.client_protocol). Raised when a
// client needs what an older daemon lacks; a client refuses a daemon below
// kMinDaemonProtocol, naming both versions (client/cpp/daemon_connection.h).
// Protocol 1 adds the exchange itself; this client serves with daemons of
// every protocol so far.
inline constexpr int kProtocol = 1;
inline constexpr int kMinDaemonProtocol = 0;
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
