// The members of a tar archive (a WebDataset shard), read from its headers
// without trusting them, and WebDataset's samples grouped from them.
//
// Formats: POSIX ustar (name with its prefix), pax extended headers ('x':
// the next member's path and size; global 'g' headers are skipped), GNU
// long names ('L'), base-256 sizes, and old v7 headers. Only regular files
// are members; links, directories, devices and FIFOs are skipped by their
// type and never followed. A member's name is data (a sample's key and
// field), never a path anything opens.
//
// Nothing in a header is believed before it is checked: the header's
// checksum, every number's digits, every member lying wholly inside the
// archive (`file_size`, the size the caller's own stat saw), long names and
// pax records capped in size, the member count capped. An archive that
// breaks one is DATA_LOSS naming the byte offset, with nothing listed; the
// caller's other shards are unaffected. Reads go through `read` (a pread of
// the confined file; a buffer in tests), one header at a time: a member's
// data is never read to index it.
#ifndef STOKER_SERVER_SOURCES_SHARDS_TAR_INDEX_H_
#define STOKER_SERVER_SOURCES_SHARDS_TAR_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stoker {

struct TarMember {
  std::string name;     // As stored (pax or GNU long name applied).
  uint64_t offset = 0;  // Of its data in the archive.
  uint64_t size = 0;
};

// Reads `n` bytes at `offset` into `out`; an error is returned as is.
using TarReader = std::function<absl::Status(uint64_t offset, size_t n, char* out)>;

// Long names and pax records longer than this are DATA_LOSS.
inline constexpr uint64_t kMaxTarNameRecord = 64 * 1024;

// Calls `each` with the archive's regular-file members in archive order
// (nothing is kept: memory does not grow with the archive); an error of
// `each` stops the walk and is returned. DATA_LOSS as above;
// RESOURCE_EXHAUSTED past `max_members`.
absl::Status ForEachTarMember(const TarReader& read, uint64_t file_size, uint64_t max_members,
                              const std::function<absl::Status(TarMember)>& each);

// One WebDataset sample: adjacent members sharing a key.
struct WebDatasetSample {
  std::string key;
  struct Field {
    std::string extension;  // Lower-cased: "jpg", "cls", "seg.png".
    uint64_t offset = 0, size = 0;  // The member's data in the archive.
  };
  std::vector<Field> fields;
};

// WebDataset's rules (its tar iterator and group_by_keys), one member at a
// time: a member's key is its name up to the first '.' after the last '/'
// (a name with nothing before that dot has none), its extension the rest,
// lower-cased; adjacent members with one key are one sample (a key met
// again later starts another). Skipped: members without a key or an
// extension, and WebDataset's metadata ("__...__" names outside folders).
// An extension met twice in one sample is DATA_LOSS, as WebDataset refuses
// it.
class WebDatasetGrouper {
 public:
  // `done` takes each finished sample; its error is Add's or Finish's.
  explicit WebDatasetGrouper(std::function<absl::Status(WebDatasetSample)> done)
      : done_(std::move(done)) {}
  absl::Status Add(const TarMember& member);
  absl::Status Finish();  // The last sample.
  uint64_t skipped() const { return skipped_; }  // Members without a key.
  // The field the last Add added to the open sample; null when it skipped
  // the member (valid until the next Add or Finish).
  const WebDatasetSample::Field* added() const {
    return added_ ? &current_.fields.back() : nullptr;
  }

 private:
  std::function<absl::Status(WebDatasetSample)> done_;
  WebDatasetSample current_;
  // The open sample's extensions: a duplicate found in constant time, so a
  // key with many members costs linear time.
  absl::flat_hash_set<std::string> extensions_;
  bool open_ = false;
  bool added_ = false;
  uint64_t skipped_ = 0;
};

// What one of our samples takes from a WebDataset sample: its first image
// member (jpg, jpeg, png), its seg.png mask, its cls label (each null when
// absent; no image: not a sample of ours, counted as skipped).
struct WebDatasetFields {
  const WebDatasetSample::Field* image = nullptr;
  const WebDatasetSample::Field* mask = nullptr;
  const WebDatasetSample::Field* cls = nullptr;
};
WebDatasetFields FieldsOf(const WebDatasetSample& sample);
// The sample's member of `extension` (a kept member's), or null.
const WebDatasetSample::Field* FieldNamed(const WebDatasetSample& sample,
                                          const std::string& extension);
// Whether FieldsOf may take a member of this extension (so its bytes
// matter to a sample).
bool IsUsedField(const std::string& extension);

// The label a .cls member's bytes hold: a non-negative decimal integer,
// spaces around it allowed, at most kMaxLabelBytes; DATA_LOSS naming the
// sample's key otherwise.
inline constexpr uint64_t kMaxLabelBytes = 32;
absl::StatusOr<int32_t> ParseLabel(absl::string_view text, absl::string_view key);

// A member's name (or key) as error messages show it: at most about 120
// bytes of it (names are up to 64 KiB of anything).
std::string Shown(absl::string_view name);

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_SHARDS_TAR_INDEX_H_
