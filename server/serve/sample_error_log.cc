#include "server/serve/sample_error_log.h"

#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "util/log.h"

namespace stoker {
namespace {

// `s` with its control bytes, backslashes and double quotes escaped (\n,
// \xNN, ...), all else as it is: readable, and one line.
std::string Escaped(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

}  // namespace

SampleErrorLog::SampleErrorLog(std::string owner, size_t max_logged,
                               std::function<void(const std::string&)> sink)
    : owner_(std::move(owner)), max_logged_(max_logged), sink_(std::move(sink)) {}

void SampleErrorLog::Report(const std::string& path, const absl::Status& status) {
  std::string line;
  {
    absl::MutexLock lock(&mu_);
    if (capped_) return;
    if (seen_.size() >= max_logged_) {
      capped_ = true;
      line = absl::StrCat(owner_, ": over ", max_logged_,
                          " samples failed; the rest are counted (stokerctl stats), not logged");
    } else {
      if (!seen_.insert(absl::Hash<std::string>{}(path)).second) return;
      // A user's bytes, escaped: a name holding a newline writes no line
      // of its own into the daemon's log.
      line = absl::StrCat(owner_, ": sample failed (delivered as zeros, counted): \"",
                          Escaped(path), "\": ", Escaped(status.message()));
    }
  }
  if (sink_) {
    sink_(line);
  } else {
    LogWarning(line);
  }
}

size_t SampleErrorLog::kept() const {
  absl::MutexLock lock(&mu_);
  return seen_.size();
}

}  // namespace stoker
