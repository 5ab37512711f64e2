#include "server/dataset/sample_source.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/dataset/dataset.h"
#include "server/dataset/proofs.h"
#include "util/cache_key.h"
#include "util/status_macros.h"

namespace stoker {

std::string SourceKey::key() const {
  return CacheKey({file, version.size, version.mtime_ns, version.ctime_ns});
}

namespace {

SourceKey FileKey(const FileVersion& v, std::shared_ptr<const OpenFile> opened) {
  return SourceKey{CacheKey({"f", v.device, v.inode}), v, std::move(opened)};
}

class FileSource : public SampleSource {
 public:
  FileSource(FileSystem* fs, std::shared_ptr<const Beneath> beneath, uint64_t max_bytes,
             ProofLimits proofs)
      : fs_(fs),
        beneath_(std::move(beneath)),
        max_bytes_(max_bytes),
        proofs_(std::move(proofs)) {}
  absl::StatusOr<SourceKey> Identify(const std::string& path) const override {
    if (std::optional<FileVersion> proven = proofs_.Find(path)) return FileKey(*proven, nullptr);
    absl::StatusOr<std::shared_ptr<const OpenFile>> file = fs_->Open(path, beneath_.get());
    if (!file.ok()) return file.status();
    const FileVersion v = (*file)->version();
    proofs_.Add(path, v);
    return FileKey(v, *std::move(file));
  }
  bool Versioned() const override { return true; }
  absl::Status Read(const std::string& path, std::string* out,
                    FileVersion* version) const override {
    FileVersion read;
    STOKER_RETURN_IF_ERROR(fs_->ReadFile(path, out, &read, beneath_.get(), max_bytes_));
    proofs_.Add(path, read);  // Opened again: proven again, as it is now.
    if (version != nullptr) *version = read;
    return absl::OkStatus();
  }
  absl::Status ReadIdentified(const SourceKey& id, const std::string& path,
                              std::string* out, FileVersion* version) const override {
    std::shared_ptr<const OpenFile> file = id.opened;
    if (file == nullptr) {
      // Proven earlier and missed by every cache: opened again, and read
      // only while it is the file proven, so no byte of another file goes
      // out under this identity (to joined reads, or into a cache).
      STOKER_ASSIGN_OR_RETURN(file, fs_->Open(path, beneath_.get()));
      proofs_.Add(path, file->version());
      if (!file->version().SameFileAs(id.version)) {
        return absl::AbortedError(absl::StrCat(
            path, " is not the file this session opened before: identify it again"));
      }
    }
    absl::Status s = fs_->ReadOpened(*file, path, out, max_bytes_);
    if (s.ok() && version != nullptr) {
      // As the file is after the read: one rewritten in place meanwhile no
      // longer matches the identity, so its bytes are served, not kept.
      struct stat st;
      *version = fstat(file->fd(), &st) == 0 ? VersionOf(st) : FileVersion{};
    }
    return s;
  }

 private:
  FileSystem* const fs_;
  const std::shared_ptr<const Beneath> beneath_;
  const uint64_t max_bytes_;
  mutable Proofs proofs_;
};

}  // namespace

std::shared_ptr<const SampleSource> MakeFileSource(
    FileSystem* fs, std::shared_ptr<const Beneath> beneath, uint64_t max_bytes,
    ProofLimits proofs) {
  return std::make_shared<FileSource>(fs, std::move(beneath), max_bytes, std::move(proofs));
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
