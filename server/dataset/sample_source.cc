#include "server/dataset/sample_source.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/dataset/dataset.h"
#include "util/cache_key.h"

namespace stoker {

std::string SourceKey::key() const {
  return CacheKey({file, version.size, version.mtime_ns, version.ctime_ns});
}

namespace {

class FileSource : public SampleSource {
 public:
  FileSource(FileSystem* fs, std::shared_ptr<const Beneath> beneath, uint64_t max_bytes)
      : fs_(fs), beneath_(std::move(beneath)), max_bytes_(max_bytes) {}
  absl::StatusOr<SourceKey> Identify(const std::string& path) const override {
    absl::StatusOr<std::shared_ptr<const OpenFile>> file = fs_->Open(path, beneath_.get());
    if (!file.ok()) return file.status();
    const FileVersion v = (*file)->version();
    return SourceKey{CacheKey({"f", v.device, v.inode}), v, *std::move(file)};
  }
  bool Versioned() const override { return true; }
  absl::Status Read(const std::string& path, std::string* out,
                    FileVersion* version) const override {
    return fs_->ReadFile(path, out, version, beneath_.get(), max_bytes_);
  }
  absl::Status ReadIdentified(const SourceKey& id, const std::string& path,
                              std::string* out, FileVersion* version) const override {
    if (id.opened == nullptr) return Read(path, out, version);
    absl::Status s = fs_->ReadOpened(*id.opened, path, out, max_bytes_);
    if (s.ok() && version != nullptr) {
      // As the file is after the read: one rewritten in place meanwhile no
      // longer matches the identity, so its bytes are served, not kept.
      struct stat st;
      *version = fstat(id.opened->fd(), &st) == 0 ? VersionOf(st) : FileVersion{};
    }
    return s;
  }

 private:
  FileSystem* const fs_;
  const std::shared_ptr<const Beneath> beneath_;
  const uint64_t max_bytes_;
};

}  // namespace

std::shared_ptr<const SampleSource> MakeFileSource(
    FileSystem* fs, std::shared_ptr<const Beneath> beneath, uint64_t max_bytes) {
  return std::make_shared<FileSource>(fs, std::move(beneath), max_bytes);
}

bool ListsBytes(const Dataset& ds) { return ds.source != nullptr && ds.source->lists_bytes(); }

uint64_t ListedBytes(const Dataset& ds, uint64_t i) {
  if (ds.source == nullptr) return 0;
  const Sample& s = ds.sample(i);
  uint64_t bytes = 0;
  for (size_t k = 0; k <= s.more.size(); ++k) {
    const std::optional<uint64_t> b = ds.source->ListedBytes(s.file(k));
    if (!b.has_value() || bytes + *b < bytes) return 0;  // Or it overflows.
    bytes += *b;
  }
  return bytes;
}

}  // namespace stoker
