// Where this host keeps its CA certificates. The shipped libcurl is built
// on Debian and looks only at Debian's paths; other distributions keep
// the bundle elsewhere. The daemon uses the first of these that is a
// readable regular file: $SSL_CERT_FILE (the operator's), then Debian and
// Ubuntu, Fedora and RHEL, openSUSE, RHEL's extracted trust store, Alpine.
//
// Pure functions but for the file checks; thread-safe.
#ifndef STOKER_SERVER_OBJSTORE_CA_BUNDLE_H_
#define STOKER_SERVER_OBJSTORE_CA_BUNDLE_H_

#include <string>
#include <vector>

namespace stoker {

// The usual places, in the order they are tried.
const std::vector<std::string>& CaBundleCandidates();

// The first of `candidates` that is a readable regular file; "" if none.
std::string FindCaBundle(const std::vector<std::string>& candidates);

// $SSL_CERT_FILE if set and non-empty, else FindCaBundle of the usual
// places; "" leaves the choice to libcurl. Looked up once per process.
const std::string& SystemCaBundle();

}  // namespace stoker

#endif  // STOKER_SERVER_OBJSTORE_CA_BUNDLE_H_
