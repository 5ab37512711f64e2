// A FileSystem for tests and benchmarks: it wraps another, counts calls,
// and injects what storage does to a reader: latency per open (the round
// trip a NAS or an object store pays per file), failed or throwing reads,
// short reads, reads that hang (NFS, FUSE) until released. Thread-safe; the options may be changed between (not
// during) reads.
#ifndef STOKER_SERVER_ACCESS_FAULT_INJECTING_FILE_SYSTEM_H_
#define STOKER_SERVER_ACCESS_FAULT_INJECTING_FILE_SYSTEM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/access/file_system.h"

namespace stoker {

// Wraps `base`, adding `latency` to every open of a path (ReadFile, Open;
// reading an open file costs only its bytes), failing reads of paths
// containing `fail_substring`, throwing from reads of paths containing
// `throw_substring` (as a library might), or truncating every read to
// `short_read_bytes`.
class FaultInjectingFileSystem : public FileSystem {
 public:
  explicit FaultInjectingFileSystem(FileSystem* base) : base_(base) {}

  absl::Status ReadFile(const std::string& path, std::string* contents,
                        FileVersion* version, const Beneath* beneath = nullptr,
                        uint64_t max_bytes = kDefaultMaxFileBytes) override;
  absl::StatusOr<std::shared_ptr<const OpenFile>> Open(
      const std::string& path, const Beneath* beneath = nullptr) override;
  absl::Status ReadOpened(const OpenFile& file, const std::string& path,
                          std::string* contents,
                          uint64_t max_bytes = kDefaultMaxFileBytes) override;

  absl::Duration latency = absl::ZeroDuration();
  std::string fail_substring;   // Empty: never fail.
  std::string throw_substring;  // Empty: never throw.
  int64_t short_read_bytes = -1;
  // Reads of paths containing `hold_substring` (empty: none) wait until
  // Release(); `holding` is notified when the first has begun.
  std::string hold_substring;
  absl::Notification holding;
  void Release() { released_.Notify(); }

  std::atomic<uint64_t> reads{0};  // ReadFile and ReadOpened calls.
  std::atomic<uint64_t> opens{0};  // Open calls.

 private:
  // The injected failures of a read of `path`, and its short read.
  absl::Status Inject(const std::string& path) const;
  void Shorten(std::string* contents) const;
  void Hold(const std::string& path);

  FileSystem* const base_;
  std::atomic<bool> held_{false};
  absl::Notification released_;
};

}  // namespace stoker

#endif  // STOKER_SERVER_ACCESS_FAULT_INJECTING_FILE_SYSTEM_H_
