#include "server/access/fault_injecting_file_system.h"

#include <stdexcept>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "util/status_macros.h"

namespace stoker {

absl::Status FaultInjectingFileSystem::Inject(const std::string& path) const {
  if (!fail_substring.empty() && absl::StrContains(path, fail_substring)) {
    return absl::UnavailableError(absl::StrCat(path, ": injected read error"));
  }
  if (!throw_substring.empty() && absl::StrContains(path, throw_substring)) {
    throw std::runtime_error("injected exception");
  }
  return absl::OkStatus();
}

void FaultInjectingFileSystem::Shorten(std::string* contents) const {
  if (short_read_bytes >= 0 && contents->size() > static_cast<size_t>(short_read_bytes)) {
    contents->resize(static_cast<size_t>(short_read_bytes));
  }
}

void FaultInjectingFileSystem::Hold(const std::string& path) {
  if (hold_substring.empty() || !absl::StrContains(path, hold_substring)) return;
  if (!held_.exchange(true)) holding.Notify();
  released_.WaitForNotification();
}

absl::Status FaultInjectingFileSystem::ReadFile(const std::string& path,
                                                std::string* contents,
                                                FileVersion* version,
                                                const Beneath* beneath,
                                                uint64_t max_bytes) {
  reads.fetch_add(1, std::memory_order_relaxed);
  if (latency > absl::ZeroDuration()) absl::SleepFor(latency);
  Hold(path);
  STOKER_RETURN_IF_ERROR(Inject(path));
  absl::Status s = base_->ReadFile(path, contents, version, beneath, max_bytes);
  if (s.ok()) Shorten(contents);
  return s;
}

absl::StatusOr<std::shared_ptr<const OpenFile>> FaultInjectingFileSystem::Open(
    const std::string& path, const Beneath* beneath) {
  opens.fetch_add(1, std::memory_order_relaxed);
  if (latency > absl::ZeroDuration()) absl::SleepFor(latency);
  return base_->Open(path, beneath);
}

absl::Status FaultInjectingFileSystem::ReadOpened(const OpenFile& file,
                                                  const std::string& path,
                                                  std::string* contents,
                                                  uint64_t max_bytes) {
  reads.fetch_add(1, std::memory_order_relaxed);
  Hold(path);
  STOKER_RETURN_IF_ERROR(Inject(path));
  absl::Status s = base_->ReadOpened(file, path, contents, max_bytes);
  if (s.ok()) Shorten(contents);
  return s;
}

}  // namespace stoker
