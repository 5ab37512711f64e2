#include "server/objstore/s3_xml.h"

#include <expat.h>

#include <algorithm>
#include <climits>
#include <functional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace stoker {
namespace {

constexpr size_t kMaxText = 4096;
constexpr size_t kMaxEntries = 10000;
constexpr int kMaxDepth = 16;

// Walks a document, handing each leaf element's text to `leaf` with the
// names of its enclosing elements (depth 1 = the root's children).
class Walker {
 public:
  using Leaf = std::function<absl::Status(const std::vector<std::string>& path,
                                          const std::string& text)>;
  using Close = std::function<absl::Status(const std::vector<std::string>& path)>;

  Walker(Leaf leaf, Close close) : leaf_(std::move(leaf)), close_(std::move(close)) {}

  absl::Status Run(absl::string_view xml) {
    XML_Parser p = XML_ParserCreate("UTF-8");
    if (p == nullptr) return absl::ResourceExhaustedError("XML parser");
    XML_SetUserData(p, this);
    XML_SetElementHandler(p, &Walker::Start, &Walker::End);
    XML_SetCharacterDataHandler(p, &Walker::Text);
    XML_SetStartDoctypeDeclHandler(p, &Walker::Doctype);
    parser_ = p;
    if (xml.size() > INT_MAX) {
      XML_ParserFree(p);
      return absl::DataLossError("object store reply over 2 GiB");
    }
    const XML_Status st = XML_Parse(p, xml.data(), static_cast<int>(xml.size()), 1);
    absl::Status out = error_;
    if (out.ok() && st != XML_STATUS_OK) {
      out = absl::DataLossError(absl::StrCat("object store reply is not XML: ",
                                             XML_ErrorString(XML_GetErrorCode(p)), " at line ",
                                             XML_GetCurrentLineNumber(p)));
    }
    XML_ParserFree(p);
    return out;
  }

 private:
  void Fail(absl::Status s) {
    if (error_.ok()) error_ = std::move(s);
    XML_StopParser(parser_, XML_FALSE);
  }
  static void Start(void* self, const XML_Char* name, const XML_Char**) {
    auto* w = static_cast<Walker*>(self);
    if (w->path_.size() >= kMaxDepth) {
      return w->Fail(absl::DataLossError("object store reply nests too deep"));
    }
    // Namespaces are not expanded: "s3:Key" and "Key" are one name.
    absl::string_view n(name);
    const size_t colon = n.rfind(':');
    if (colon != absl::string_view::npos) n.remove_prefix(colon + 1);
    w->path_.emplace_back(n);
    w->text_.clear();
    w->leaf_open_ = true;
  }
  static void End(void* self, const XML_Char*) {
    auto* w = static_cast<Walker*>(self);
    if (!w->error_.ok()) return;
    std::vector<std::string> inner(w->path_.begin() + (w->path_.empty() ? 0 : 1),
                                   w->path_.end());
    absl::Status s = w->leaf_open_ ? w->leaf_(inner, w->text_) : w->close_(inner);
    if (!s.ok()) return w->Fail(std::move(s));
    w->leaf_open_ = false;
    w->text_.clear();
    if (!w->path_.empty()) w->path_.pop_back();
  }
  static void Text(void* self, const XML_Char* s, int len) {
    auto* w = static_cast<Walker*>(self);
    if (w->text_.size() + static_cast<size_t>(len) > kMaxText) {
      return w->Fail(absl::DataLossError("object store reply has a text over 4 KiB"));
    }
    w->text_.append(s, static_cast<size_t>(len));
  }
  static void Doctype(void* self, const XML_Char*, const XML_Char*, const XML_Char*, int) {
    static_cast<Walker*>(self)->Fail(
        absl::DataLossError("object store reply declares a DOCTYPE"));
  }

  Leaf leaf_;
  Close close_;
  XML_Parser parser_ = nullptr;
  std::vector<std::string> path_;
  std::string text_;
  bool leaf_open_ = false;
  absl::Status error_;
};

bool Is(const std::vector<std::string>& path, std::initializer_list<absl::string_view> want) {
  return std::equal(path.begin(), path.end(), want.begin(), want.end());
}

}  // namespace

absl::StatusOr<ListPage> ParseListPage(absl::string_view xml) {
  ListPage page;
  ListedObject current;
  bool root_seen = false;
  auto room = [&]() -> absl::Status {
    if (page.objects.size() + page.prefixes.size() >= kMaxEntries) {
      return absl::DataLossError("object store listing page has over 10,000 entries");
    }
    return absl::OkStatus();
  };
  Walker w(
      [&](const std::vector<std::string>& path, const std::string& text) -> absl::Status {
        root_seen = true;
        if (Is(path, {"Contents", "Key"})) {
          current.key = text;
        } else if (Is(path, {"Contents", "Size"})) {
          if (!absl::SimpleAtoi(text, &current.size)) {
            return absl::DataLossError(
                absl::StrCat("object store listing: size '", text.substr(0, 40), "'"));
          }
        } else if (Is(path, {"Contents", "ETag"})) {
          current.etag = std::string(absl::StripSuffix(absl::StripPrefix(text, "\""), "\""));
        } else if (Is(path, {"CommonPrefixes", "Prefix"})) {
          if (absl::Status s = room(); !s.ok()) return s;
          page.prefixes.push_back(text);
        } else if (Is(path, {"IsTruncated"})) {
          page.truncated = text == "true";
        } else if (Is(path, {"NextContinuationToken"})) {
          page.next_token = text;
        }
        return absl::OkStatus();
      },
      [&](const std::vector<std::string>& path) -> absl::Status {
        root_seen = true;
        if (Is(path, {"Contents"})) {
          if (current.key.empty()) {
            return absl::DataLossError("object store listing: an entry without a key");
          }
          if (absl::Status s = room(); !s.ok()) return s;
          page.objects.push_back(std::move(current));
          current = ListedObject{};
        }
        return absl::OkStatus();
      });
  if (absl::Status s = w.Run(xml); !s.ok()) return s;
  if (!root_seen) return absl::DataLossError("object store listing is empty");
  if (page.truncated && page.next_token.empty()) {
    return absl::DataLossError("object store listing is truncated with no continuation token");
  }
  return page;
}

std::string S3ErrorCode(absl::string_view xml) {
  std::string code;
  Walker w(
      [&](const std::vector<std::string>& path, const std::string& text) {
        if (Is(path, {"Code"}) && text.size() <= 64 &&
            std::all_of(text.begin(), text.end(), [](char c) {
              return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.';
            })) {
          code = text;
        }
        return absl::OkStatus();
      },
      [](const std::vector<std::string>&) { return absl::OkStatus(); });
  (void)w.Run(xml);
  return code;
}

}  // namespace stoker
