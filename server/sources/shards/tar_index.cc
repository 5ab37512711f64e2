#include "server/sources/shards/tar_index.h"

#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace stoker {
namespace {

constexpr uint64_t kBlock = 512;

absl::Status Broken(uint64_t offset, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("tar header at byte ", offset, ": ", what));
}

// A numeric field: octal digits (spaces and NULs around them), or GNU's
// base-256 (high bit of the first byte set; positive only). False for
// anything else, or a value past 2^63.
bool Number(const char* field, size_t n, uint64_t* out) {
  const auto* b = reinterpret_cast<const uint8_t*>(field);
  if (b[0] & 0x80) {
    if (b[0] != 0x80) return false;  // Negative, or too large.
    uint64_t v = 0;
    for (size_t i = 1; i < n; ++i) {
      if (v >> 55) return false;
      v = (v << 8) | b[i];
    }
    *out = v;
    return v >> 63 == 0;
  }
  size_t i = 0;
  while (i < n && (field[i] == ' ' || field[i] == '\0')) ++i;
  uint64_t v = 0;
  size_t digits = 0;
  for (; i < n && field[i] >= '0' && field[i] <= '7'; ++i, ++digits) {
    if (v >> 60) return false;
    v = v * 8 + static_cast<uint64_t>(field[i] - '0');
  }
  for (; i < n; ++i) {
    if (field[i] != ' ' && field[i] != '\0') return false;
  }
  *out = v;
  return digits > 0 || n == 0;
}

std::string Field(const char* field, size_t n) {
  return std::string(field, strnlen(field, n));
}

bool ChecksumHolds(const char* h) {
  uint64_t want = 0;
  if (!Number(h + 148, 8, &want)) return false;
  uint64_t sum = 0;
  int64_t signed_sum = 0;
  for (uint64_t i = 0; i < kBlock; ++i) {
    const char c = i >= 148 && i < 156 ? ' ' : h[i];
    sum += static_cast<uint8_t>(c);
    signed_sum += static_cast<signed char>(c);
  }
  return want == sum || static_cast<int64_t>(want) == signed_sum;
}

bool AllZero(const char* h) {
  for (uint64_t i = 0; i < kBlock; ++i) {
    if (h[i] != 0) return false;
  }
  return true;
}

// The pax records "<len> <key>=<value>\n" of `data`: the path and size
// they set. False for a malformed record.
bool PaxRecords(absl::string_view data, std::string* path, uint64_t* size, bool* has_size) {
  while (!data.empty()) {
    const size_t space = data.find(' ');
    uint64_t len = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtoi(data.substr(0, space), &len) ||
        len <= space + 1 || len > data.size() || data[len - 1] != '\n') {
      return false;
    }
    const absl::string_view record = data.substr(space + 1, len - space - 2);
    data.remove_prefix(len);
    const size_t eq = record.find('=');
    if (eq == absl::string_view::npos) return false;
    const absl::string_view key = record.substr(0, eq), value = record.substr(eq + 1);
    if (key == "path") {
      *path = std::string(value);
    } else if (key == "size") {
      if (!absl::SimpleAtoi(value, size)) return false;
      *has_size = true;
    }
  }
  return true;
}

}  // namespace

absl::Status ForEachTarMember(const TarReader& read, uint64_t file_size, uint64_t max_members,
                              const std::function<absl::Status(TarMember)>& each) {
  uint64_t members = 0;
  char h[kBlock];
  std::string long_name, pax_path;  // For the next member.
  uint64_t pax_size = 0;
  bool has_pax_size = false;
  uint64_t at = 0;
  while (at + kBlock <= file_size) {
    if (absl::Status s = read(at, kBlock, h); !s.ok()) return s;
    if (AllZero(h)) break;  // The end (two zero blocks; one is enough).
    if (!ChecksumHolds(h)) return Broken(at, "checksum does not match (not a tar, or damaged)");
    uint64_t size = 0;
    if (!Number(h + 124, 12, &size)) return Broken(at, "size is not a number");
    const char type = h[156];
    const bool extension = type == 'x' || type == 'L';
    if (has_pax_size && !extension && type != 'g') size = pax_size;  // Past 8 GiB.
    const uint64_t data = at + kBlock;
    if (size > file_size - data) {
      return Broken(at, absl::StrCat("its data of ", size, " bytes runs past the end of the ",
                                     file_size, "-byte archive"));
    }
    if (extension) {
      if (size > kMaxTarNameRecord) {
        return Broken(at, absl::StrCat("a long name or pax header of ", size,
                                       " bytes (at most ", kMaxTarNameRecord, ")"));
      }
      std::string record(size, '\0');
      if (size > 0) {
        if (absl::Status s = read(data, size, record.data()); !s.ok()) return s;
      }
      if (type == 'L') {
        long_name = Field(record.data(), record.size());
      } else if (!PaxRecords(record, &pax_path, &pax_size, &has_pax_size)) {
        return Broken(at, "a pax header record is malformed");
      } else if (has_pax_size && pax_size > file_size) {
        return Broken(at, "a pax size is past the end of the archive");
      }
    } else if (type != 'g') {
      if (type == '0' || type == '\0' || type == '7') {
        std::string name;
        if (!pax_path.empty()) {
          name = std::move(pax_path);
        } else if (!long_name.empty()) {
          name = std::move(long_name);
        } else {
          name = Field(h, 100);
          const bool ustar = std::memcmp(h + 257, "ustar", 5) == 0;
          if (ustar && h[345] != '\0') name = absl::StrCat(Field(h + 345, 155), "/", name);
        }
        if (members++ >= max_members) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "tar archive has more members than the ", max_members,
              " the dataset may still list (--max-dataset-files)"));
        }
        if (absl::Status s = each(TarMember{std::move(name), data, size}); !s.ok()) return s;
      }
      // Whatever it was, the extensions applied to it.
      long_name.clear();
      pax_path.clear();
      has_pax_size = false;
    }
    // Data padded to whole blocks; size <= file_size - data keeps this
    // from wrapping.
    at = data + (size + kBlock - 1) / kBlock * kBlock;
  }
  if (at < file_size && at + kBlock > file_size) {
    return Broken(at, absl::StrCat("the archive ends ", file_size - at,
                                   " bytes into a header (cut short)"));
  }
  return absl::OkStatus();
}

absl::Status WebDatasetGrouper::Add(const TarMember& member) {
  added_ = false;
  const std::string& name = member.name;
  const size_t slash = name.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  if (slash == std::string::npos && absl::StartsWith(name, "__") && absl::EndsWith(name, "__")) {
    ++skipped_;  // WebDataset's metadata.
    return absl::OkStatus();
  }
  const size_t dot = name.find('.', base);
  if (dot == std::string::npos || dot == base || dot + 1 == name.size()) {
    ++skipped_;
    return absl::OkStatus();
  }
  std::string key = name.substr(0, dot);
  std::string extension = absl::AsciiStrToLower(name.substr(dot + 1));
  if (open_ && current_.key != key) {
    if (absl::Status s = done_(std::move(current_)); !s.ok()) return s;
    open_ = false;
  }
  if (!open_) {
    current_ = WebDatasetSample{std::move(key), {}};
    extensions_.clear();
    open_ = true;
  }
  if (!extensions_.insert(extension).second) {
    return absl::DataLossError(absl::StrCat("sample ", Shown(current_.key), " has two .",
                                            Shown(extension), " members"));
  }
  current_.fields.push_back({std::move(extension), member.offset, member.size});
  added_ = true;
  return absl::OkStatus();
}

absl::Status WebDatasetGrouper::Finish() {
  if (!open_) return absl::OkStatus();
  open_ = false;
  return done_(std::move(current_));
}

namespace {
bool IsImage(const std::string& extension) {
  return extension == "jpg" || extension == "jpeg" || extension == "png";
}
}  // namespace

bool IsUsedField(const std::string& extension) {
  return IsImage(extension) || extension == "seg.png" || extension == "cls";
}

WebDatasetFields FieldsOf(const WebDatasetSample& sample) {
  WebDatasetFields out;
  for (const WebDatasetSample::Field& f : sample.fields) {
    if (IsImage(f.extension) && out.image == nullptr) out.image = &f;
    if (f.extension == "seg.png") out.mask = &f;
    if (f.extension == "cls") out.cls = &f;
  }
  return out;
}

const WebDatasetSample::Field* FieldNamed(const WebDatasetSample& sample,
                                          const std::string& extension) {
  for (const WebDatasetSample::Field& f : sample.fields) {
    if (f.extension == extension) return &f;
  }
  return nullptr;
}

absl::StatusOr<int32_t> ParseLabel(absl::string_view text, absl::string_view key) {
  int32_t label = 0;
  if (text.size() > kMaxLabelBytes) {
    return absl::DataLossError(
        absl::StrCat(Shown(key), ".cls is not a label (over ", kMaxLabelBytes, " bytes)"));
  }
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &label) || label < 0) {
    return absl::DataLossError(
        absl::StrCat(Shown(key), ".cls holds no non-negative integer label"));
  }
  return label;
}

std::string Shown(absl::string_view name) {
  if (name.size() <= 120) return std::string(name);
  return absl::StrCat(name.substr(0, 100), "...(", name.size(), " bytes)");
}

}  // namespace stoker
