// Command-line conventions of stokerd on top of absl flags: byte sizes with
// units ("2G", "512M", "64Ki", plain bytes), and one flag style with dashes
// (--l1-bytes); the older underscore spellings still work for one release,
// with a warning. Stateless; thread-safe.
#ifndef STOKER_SERVER_DAEMON_FLAG_TYPES_H_
#define STOKER_SERVER_DAEMON_FLAG_TYPES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace stoker {

// A byte count parsed from "<number>[K|M|G|T][i][B]" (K = 1024, as for
// memory; "k"/"K" alike), e.g. 2G = 2147483648.
struct ByteSize {
  uint64_t bytes = 0;
};
bool AbslParseFlag(absl::string_view text, ByteSize* out, std::string* error);
std::string AbslUnparseFlag(ByteSize size);

// Rewrites "--some-flag[=v]" to absl's "--some_flag[=v]" in place; warns on
// stderr about each "--some_flag" spelling. Arguments after "--" are left.
void NormalizeFlagSpelling(const char* program, int argc, char** argv,
                           std::vector<std::string>* storage);

}  // namespace stoker

#endif  // STOKER_SERVER_DAEMON_FLAG_TYPES_H_
