#include "server/sample_source.h"

#include <utility>

namespace stoker {
namespace {

class FileSource : public SampleSource {
 public:
  FileSource(FileSystem* fs, std::shared_ptr<const Beneath> beneath)
      : fs_(fs), beneath_(std::move(beneath)) {}
  std::string CacheKey(const std::string& path) const override { return path; }
  bool Versioned() const override { return true; }
  absl::StatusOr<FileVersion> Stat(const std::string& path) const override {
    return fs_->Stat(path, beneath_.get());
  }
  absl::Status Read(const std::string& path, std::string* out,
                    FileVersion* version) const override {
    return fs_->ReadFile(path, out, version, beneath_.get());
  }

 private:
  FileSystem* const fs_;
  const std::shared_ptr<const Beneath> beneath_;
};

class LmdbSource : public SampleSource {
 public:
  explicit LmdbSource(std::shared_ptr<const LmdbEnv> env) : env_(std::move(env)) {}
  std::string CacheKey(const std::string& path) const override {
    return "lmdb:" + env_->path() + ":" + path;
  }
  bool Versioned() const override { return false; }
  absl::StatusOr<FileVersion> Stat(const std::string&) const override {
    return FileVersion{};
  }
  absl::Status Read(const std::string& path, std::string* out,
                    FileVersion*) const override {
    return env_->Get(path, out);
  }

 private:
  const std::shared_ptr<const LmdbEnv> env_;
};

}  // namespace

std::shared_ptr<const SampleSource> MakeFileSource(
    FileSystem* fs, std::shared_ptr<const Beneath> beneath) {
  return std::make_shared<FileSource>(fs, std::move(beneath));
}

std::shared_ptr<const SampleSource> MakeLmdbSource(
    std::shared_ptr<const LmdbEnv> env) {
  return std::make_shared<LmdbSource>(std::move(env));
}

}  // namespace stoker
