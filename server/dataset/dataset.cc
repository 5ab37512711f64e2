#include "server/dataset/dataset.h"

#include <algorithm>
#include <functional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/access/file_system.h"
#include "server/dataset/dataset_growth.h"
#include "util/status_macros.h"

namespace stoker {

uint64_t Dataset::sample_count() const {
  return growth != nullptr ? growth->published_samples() : samples.size();
}

const Sample& Dataset::GrowingSample(uint64_t i) const { return growth->sample(i); }

uint64_t Dataset::expected_samples() const {
  return growth != nullptr ? growth->expected_samples() : samples.size();
}

Listing Dataset::Listed() const {
  if (growth != nullptr) return growth->Now();
  return Listing{first_epoch_windows, true, absl::OkStatus(), num_classes};
}

Listing Dataset::WaitListed(size_t known, absl::Duration timeout) const {
  return growth != nullptr ? growth->Wait(known, timeout) : Listed();
}

std::pair<uint64_t, uint64_t> Dataset::FirstEpochWindowAround(uint64_t i) const {
  return growth != nullptr ? growth->WindowAround(i) : WindowAround(first_epoch_windows, i);
}

std::pair<uint64_t, uint64_t> Dataset::OpeningReads() const {
  return growth != nullptr ? growth->reads()
                           : std::make_pair(read_ahead_requests, read_ahead_bytes);
}

absl::Status ParseManifest(
    const std::string& manifest, const ScanLimits& limits, size_t max_files,
    const std::function<absl::Status(std::vector<std::string>, int32_t)>& fn, bool label_optional) {
  FileSystem* fs = limits.fs != nullptr ? limits.fs : FileSystem::Default();
  std::string text;
  absl::Status read =
      fs->ReadFile(manifest, &text, nullptr, limits.within, limits.max_file_bytes);
  if (!read.ok()) {
    return absl::Status(read.code(), absl::StrCat("dataset manifest ", read.message()));
  }
  return ParseManifestText(manifest, text, limits, max_files, fn, label_optional);
}

absl::Status ParseManifestText(
    const std::string& manifest, absl::string_view text, const ScanLimits& limits,
    size_t max_files, const std::function<absl::Status(std::vector<std::string>, int32_t)>& fn,
    bool label_optional) {
  size_t files = 0;  // Of the first sample line.
  uint64_t lineno = 0;
  for (absl::string_view rest = text; !rest.empty();) {
    const size_t eol = rest.find('\n');
    const absl::string_view line = rest.substr(0, eol);
    rest = eol == absl::string_view::npos ? absl::string_view() : rest.substr(eol + 1);
    if (++lineno > limits.max_files || line.size() > limits.max_line_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "dataset manifest ", manifest, " line ", lineno, ": over the daemon's limit of ",
          line.size() > limits.max_line_bytes
              ? absl::StrCat(limits.max_line_bytes, " bytes per line")
              : absl::StrCat(limits.max_files, " lines (--max-dataset-files)")));
    }
    const absl::string_view content = absl::StripTrailingAsciiWhitespace(line);
    if (content.empty() || content[0] == '#') continue;
    std::vector<absl::string_view> parts = absl::StrSplit(content, '\t');
    int32_t label = -1;
    if (label_optional && !(parts.size() >= 2 && absl::SimpleAtoi(parts.back(), &label))) {
      parts.push_back("0");  // No label column: every column is a path.
    }
    const bool paths_ok =
        parts.size() >= 2 && parts.size() - 1 <= max_files &&
        std::none_of(parts.begin(), parts.end() - 1,
                     [](absl::string_view p) { return p.empty(); });
    const bool count_ok = files == 0 || parts.size() - 1 == files;
    if (!paths_ok || !count_ok || !absl::SimpleAtoi(parts.back(), &label) ||
        label < 0) {
      // The line itself is never quoted: the daemon may read files the
      // caller cannot, and an error message must not disclose them.
      return absl::FailedPreconditionError(absl::StrCat(
          "dataset manifest ", manifest, " line ", lineno,
          ": expected 'relative/path", max_files > 1 ? "[<TAB>path...]" : "",
          label_optional ? "[<TAB>label]" : "<TAB>label", "' with a label >= 0 (",
          !paths_ok   ? absl::StrCat("not 1..", max_files,
                                     " non-empty paths and a label")
          : !count_ok ? absl::StrCat(parts.size() - 1, " paths where the first "
                                     "line has ", files)
                      : "the label is not a number >= 0",
          ")"));
    }
    files = parts.size() - 1;
    STOKER_RETURN_IF_ERROR(fn(std::vector<std::string>(parts.begin(), parts.end() - 1), label));
  }
  return absl::OkStatus();
}

absl::Status ListCharge::Add(const Sample& s) {
  if (!charge_) return absl::OkStatus();
  pending_ += sizeof(Sample) + s.path.size();
  for (const std::string& m : s.more) pending_ += sizeof(std::string) + m.size();
  return pending_ < kStep ? absl::OkStatus() : Charge();
}

absl::Status ListCharge::Finish(Dataset* ds) {
  if (charge_ && pending_ > 0) STOKER_RETURN_IF_ERROR(Charge());
  ds->list_charge = std::move(tokens_);
  return absl::OkStatus();
}

absl::Status ListCharge::Charge() {
  std::shared_ptr<void> token = charge_(pending_);
  if (token == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the dataset's sample list passed this user's memory for sample lists (",
        charged_ + pending_,
        " bytes so far; --max-list-bytes-per-user): use a shorter root or fewer samples"));
  }
  tokens_.push_back(std::move(token));
  charged_ += pending_;
  pending_ = 0;
  return absl::OkStatus();
}

std::pair<uint64_t, uint64_t> WindowAround(const std::vector<uint64_t>& windows, uint64_t i) {
  uint64_t first = 0;
  for (uint64_t size : windows) {
    if (i < first + size) return {first, size};
    first += size;
  }
  return {i, 1};
}

uint32_t NumClasses(const std::vector<Sample>& samples) {
  int64_t max_label = -1;
  for (const Sample& s : samples) max_label = std::max<int64_t>(max_label, s.label);
  return static_cast<uint32_t>(max_label + 1);
}

}  // namespace stoker
