#include "server/objstore/ca_bundle.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace stoker {

const std::vector<std::string>& CaBundleCandidates() {
  static const auto* kCandidates = new std::vector<std::string>{
      "/etc/ssl/certs/ca-certificates.crt",                 // Debian, Ubuntu, Arch
      "/etc/pki/tls/certs/ca-bundle.crt",                   // Fedora, RHEL
      "/etc/ssl/ca-bundle.pem",                             // openSUSE
      "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  // RHEL 7 and later
      "/etc/ssl/cert.pem",                                  // Alpine
  };
  return *kCandidates;
}

std::string FindCaBundle(const std::vector<std::string>& candidates) {
  for (const std::string& path : candidates) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(path.c_str(), R_OK) == 0) {
      return path;
    }
  }
  return "";
}

const std::string& SystemCaBundle() {
  static const auto* kBundle = [] {
    const char* env = std::getenv("SSL_CERT_FILE");
    if (env != nullptr && *env != '\0') return new std::string(env);
    return new std::string(FindCaBundle(CaBundleCandidates()));
  }();
  return *kBundle;
}

}  // namespace stoker
