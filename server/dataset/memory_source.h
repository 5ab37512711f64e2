// Test doubles for the reader stage: a SampleSource of files held in memory,
// whose reads are counted and can be held or made to fail, and an
// ArraySource of float rows. Tests only. Thread-safe.
#ifndef STOKER_SERVER_DATASET_MEMORY_SOURCE_H_
#define STOKER_SERVER_DATASET_MEMORY_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "server/dataset/array_source.h"
#include "server/dataset/dataset.h"
#include "server/dataset/sample_source.h"

namespace stoker {

class MemorySource : public SampleSource {
 public:
  // `name` stands for the source's identity (a root's device and inode):
  // two sources of one name share cache entries, as one root does.
  explicit MemorySource(std::string name, bool versioned = true)
      : name_(std::move(name)), versioned_(versioned) {}

  // Sets the file's bytes at version `mtime` (its size is the bytes').
  void Put(const std::string& path, std::string bytes, int64_t mtime = 1) {
    absl::MutexLock lock(&mu_);
    files_[path] = File{std::move(bytes), mtime};
  }
  // Reads of the file report version `mtime` from now on while Identify
  // keeps the old one: the file replaced between the stat and the read.
  void ReplaceOnRead(const std::string& path, int64_t mtime) {
    absl::MutexLock lock(&mu_);
    files_[path].read_mtime = mtime;
  }
  // Reads wait until Release(); Holding() is notified when one has begun.
  void Hold() {
    absl::MutexLock lock(&mu_);
    held_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    held_ = false;
  }
  absl::Notification& Holding() { return holding_; }
  // From now on, Identify's keys are not proven until the file is read
  // again (SourceKey::proven), as an object store session's are until it
  // reads the object.
  void ProveByReading() {
    absl::MutexLock lock(&mu_);
    prove_by_reading_ = true;
    for (auto& [path, f] : files_) f.read = false;
  }
  int reads() const { return reads_.load(); }
  const std::string& name() const { return name_; }

  absl::StatusOr<SourceKey> Identify(const std::string& path) const override {
    absl::MutexLock lock(&mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return absl::NotFoundError("no such file");
    SourceKey id{absl::StrCat(name_, ":", path), VersionOf(it->second, it->second.mtime)};
    id.proven = !prove_by_reading_ || it->second.read;
    return id;
  }
  bool Versioned() const override { return versioned_; }
  absl::Status Read(const std::string& path, std::string* out,
                    FileVersion* version) const override {
    ++reads_;
    absl::MutexLock lock(&mu_);
    if (held_) {
      if (!holding_.HasBeenNotified()) holding_.Notify();
      mu_.Await(absl::Condition(+[](bool* held) { return !*held; }, &held_));
    }
    auto it = files_.find(path);
    if (it == files_.end()) return absl::NotFoundError("no such file");
    it->second.read = true;
    *out = it->second.bytes;
    if (version != nullptr && versioned_) {
      *version = VersionOf(it->second,
                           it->second.read_mtime ? it->second.read_mtime : it->second.mtime);
    }
    return absl::OkStatus();
  }

 private:
  struct File {
    std::string bytes;
    int64_t mtime = 1;
    int64_t read_mtime = 0;
    mutable bool read = false;  // Since Put (ProveByReading).
  };
  FileVersion VersionOf(const File& f, int64_t mtime) const {
    if (!versioned_) return FileVersion{};
    return FileVersion{f.bytes.size(), mtime, 1, std::hash<std::string>()(name_)};
  }
  const std::string name_;
  const bool versioned_;
  mutable absl::Mutex mu_;
  std::map<std::string, File> files_ ABSL_GUARDED_BY(mu_);
  mutable bool held_ ABSL_GUARDED_BY(mu_) = false;
  bool prove_by_reading_ ABSL_GUARDED_BY(mu_) = false;
  mutable absl::Notification holding_;
  mutable std::atomic<int> reads_{0};
};

// A Dataset of `paths` (one sample each, label = position) over `source`
// ("memory:<name>" for a MemorySource, as a folder's names its path).
inline std::shared_ptr<Dataset> MemoryDataset(std::shared_ptr<const SampleSource> source,
                                              const std::vector<std::vector<std::string>>& files) {
  auto ds = std::make_shared<Dataset>();
  const auto* memory = dynamic_cast<const MemorySource*>(source.get());
  ds->description = memory != nullptr ? "memory:" + memory->name() : "memory";
  for (size_t i = 0; i < files.size(); ++i) {
    ds->samples.push_back(Sample{files[i][0], static_cast<int32_t>(i),
                                 std::vector<std::string>(files[i].begin() + 1, files[i].end())});
  }
  ds->files_per_sample = files.empty() ? 1 : static_cast<uint32_t>(files[0].size());
  ds->source = std::move(source);
  return ds;
}

// Rows of `width` float32 values; row i's value j is i * 1000 + j, and in
// its array k (of `files`) k * 100000 more. Rows in `broken` fail their
// reads as a file that is not an array does. With `spans`, the rows are
// also held in memory as RowSpans, with the broken ones left out.
class MemoryArrays : public ArraySource {
 public:
  MemoryArrays(size_t rows, uint64_t width, std::vector<size_t> broken = {}, uint32_t files = 1,
               bool spans = false)
      : rows_(rows), shape_{width}, broken_(std::move(broken)), files_(files) {
    if (!spans) return;
    held_.resize(files);
    for (uint32_t k = 0; k < files; ++k) {
      for (size_t i = 0; i < rows; ++i) {
        for (uint64_t j = 0; j < width; ++j) held_[k].push_back(Value(k, i, j));
      }
    }
  }
  std::vector<RowSpan> RowSpans(uint32_t file) const override {
    std::vector<RowSpan> spans;
    if (held_.empty()) return spans;
    for (size_t i = 0; i < rows_; ++i) {
      if (!Broken(i).ok()) continue;
      if (spans.empty() || spans.back().first + spans.back().rows != i) {
        spans.push_back(RowSpan{i, 0, reinterpret_cast<const uint8_t*>(&held_[file][i * shape_[0]]),
                                shape_[0] * 4, ElemType::kFloat32, &shape_, false});
      }
      ++spans.back().rows;
    }
    return spans;
  }
  static float Value(uint32_t file, size_t i, uint64_t j) {
    return static_cast<float>(file * 100000 + i * 1000 + j);
  }
  size_t size() const override { return rows_; }
  ElemType type() const override { return ElemType::kFloat32; }
  const std::vector<uint64_t>& shape(size_t) const override { return shape_; }
  int64_t label(size_t i) const override { return static_cast<int64_t>(i % 3); }
  std::string Name(size_t i) const override { return absl::StrCat("rows[", i, "]"); }
  absl::Status Broken(size_t i) const override {
    for (size_t b : broken_) {
      if (b == i) return absl::FailedPreconditionError(absl::StrCat(Name(i), ": not an array"));
    }
    return absl::OkStatus();
  }
  uint32_t files() const override { return files_; }
  absl::Status ReadArray(size_t i, uint32_t file, const uint64_t* start, const uint64_t* count,
                         ElemType to, uint8_t* dst) const override {
    std::vector<float> row(shape_[0]);
    for (uint64_t j = 0; j < shape_[0]; ++j) row[j] = Value(file, i, j);
    CopyRegion(reinterpret_cast<const uint8_t*>(row.data()), ElemType::kFloat32, shape_, start,
               count, dst, to);
    return absl::OkStatus();
  }

 private:
  const size_t rows_;
  const std::vector<uint64_t> shape_;
  const std::vector<size_t> broken_;
  const uint32_t files_;
  std::vector<std::vector<float>> held_;  // Per file, with `spans`.
};

}  // namespace stoker

#endif  // STOKER_SERVER_DATASET_MEMORY_SOURCE_H_
