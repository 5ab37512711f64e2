// Secrets the daemon hands out (ring handoff tokens, caller tokens): 128
// random bits as 32 hex digits, compared in constant time. Stateless;
// thread-safe.
#ifndef STOKER_SERVER_ACCESS_TOKEN_H_
#define STOKER_SERVER_ACCESS_TOKEN_H_

#include <random>
#include <string>

#include "absl/strings/str_cat.h"

namespace stoker {

inline std::string RandomToken() {
  std::random_device rd;  // /dev/urandom on Linux.
  std::string out;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&out, absl::Hex(rd(), absl::kZeroPad8));
  return out;
}

inline bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size() || a.empty()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

}  // namespace stoker

#endif  // STOKER_SERVER_ACCESS_TOKEN_H_
