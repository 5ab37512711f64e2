#include "server/daemon/flag_types.h"

#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace stoker {

bool AbslParseFlag(absl::string_view text, ByteSize* out, std::string* error) {
  std::string t = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  if (!t.empty() && t.back() == 'B') t.pop_back();
  if (!t.empty() && t.back() == 'I') t.pop_back();
  int shift = 0;
  if (!t.empty()) {
    switch (t.back()) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      default: break;
    }
    if (shift) t.pop_back();
  }
  uint64_t n = 0;
  if (t.empty() || !absl::SimpleAtoi(t, &n) || (shift && n > (UINT64_MAX >> shift))) {
    *error = absl::StrCat("'", text, "' is not a size like 2G, 512M or 1048576");
    return false;
  }
  out->bytes = n << shift;
  return true;
}

std::string AbslUnparseFlag(ByteSize size) {
  for (auto [shift, unit] : {std::pair{40, "T"}, std::pair{30, "G"},
                             std::pair{20, "M"}, std::pair{10, "K"}}) {
    if (size.bytes != 0 && size.bytes % (uint64_t{1} << shift) == 0) {
      return absl::StrCat(size.bytes >> shift, unit);
    }
  }
  return absl::StrCat(size.bytes);
}

void NormalizeFlagSpelling(const char* program, int argc, char** argv,
                           std::vector<std::string>* storage) {
  storage->reserve(argc);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    const std::string name = arg.substr(2, end - 2);
    if (name.find('_') != std::string::npos) {
      std::string dashed = name;
      for (char& c : dashed) c = c == '_' ? '-' : c;
      std::fprintf(stderr, "%s: --%s is spelled --%s now; the old spelling "
                   "goes away in the next release\n", program, name.c_str(),
                   dashed.c_str());
      continue;
    }
    if (name.find('-') == std::string::npos) continue;
    for (size_t k = 2; k < end; ++k) {
      if (arg[k] == '-') arg[k] = '_';
    }
    storage->push_back(arg);
    argv[i] = storage->back().data();
  }
}

}  // namespace stoker
