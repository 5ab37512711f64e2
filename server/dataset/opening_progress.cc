#include "server/dataset/opening_progress.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stoker {
namespace {

// 1,234,567
std::string Count(uint64_t n) {
  std::string digits = absl::StrCat(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// Both sizes in the larger one's unit: "1.2 of 54.0 GiB".
std::string Sizes(uint64_t done, uint64_t total) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double scale = 1;
  while (u < 4 && static_cast<double>(total) >= scale * 1024) {
    scale *= 1024;
    ++u;
  }
  if (u == 0) return absl::StrCat(done, " of ", total, " bytes");
  return absl::StrFormat("%.1f of %.1f %s", done / scale, total / scale, units[u]);
}

std::string Duration(absl::Duration d) {
  const int64_t s = static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(d)));
  if (s < 90) return absl::StrCat(s, " s");
  if (s < 90 * 60) return absl::StrCat((s + 30) / 60, " min");
  return absl::StrFormat("%.1f h", s / 3600.0);
}

}  // namespace

OpeningProgress::View OpeningProgress::Now(absl::Time now) const {
  View v;
  v.listed = listed_.load(std::memory_order_relaxed);
  v.shards = shards_.load(std::memory_order_relaxed);
  v.shards_done = shards_done_.load(std::memory_order_relaxed);
  v.bytes = bytes_.load(std::memory_order_relaxed);
  v.bytes_read = bytes_read_.load(std::memory_order_relaxed);
  v.elapsed = std::max(absl::ZeroDuration(), now - start_);
  if (v.bytes > 0 && v.bytes_read > 0 && v.elapsed > absl::ZeroDuration()) {
    const double rate = v.bytes_read / absl::ToDoubleSeconds(v.elapsed);
    v.left = absl::Seconds((v.bytes - std::min(v.bytes_read, v.bytes)) / rate);
  }
  return v;
}

std::string OpeningProgress::Summary(const std::string& name, absl::Time now) const {
  const View v = Now(now);
  std::string out = name;
  const char* sep = ": ";
  auto add = [&](const std::string& part) {
    absl::StrAppend(&out, sep, part);
    sep = ", ";
  };
  if (v.listed > 0) add(absl::StrCat(Count(v.listed), " listed"));
  if (v.shards > 0) add(absl::StrCat(Count(v.shards_done), " of ", Count(v.shards), " shards"));
  if (v.bytes > 0) add(absl::StrCat(Sizes(v.bytes_read, v.bytes), " read"));
  if (v.left != absl::InfiniteDuration()) add(absl::StrCat("about ", Duration(v.left), " left"));
  if (v.listed == 0 && v.shards == 0) add("starting");
  add(absl::StrCat(Duration(v.elapsed), " so far"));
  return out;
}

}  // namespace stoker
