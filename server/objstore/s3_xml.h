// The two XML bodies the S3 client reads: a ListObjectsV2 page and an error.
//
// Parsed with expat, bounded: no DOCTYPE (so no entities of the server's
// own), text of one element at most 4 KiB, at most 10,000 entries a page.
// The body comes from an endpoint the operator listed, but it is still
// input: a lie is DATA_LOSS naming what is wrong, never a crash or an
// unbounded allocation. An error body's message is never echoed (S3's
// SignatureDoesNotMatch carries the canonical request, which holds the
// caller's session token): only its <Code>.
//
// Functions of their arguments; thread-safe.
#ifndef STOKER_SERVER_OBJSTORE_S3_XML_H_
#define STOKER_SERVER_OBJSTORE_S3_XML_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stoker {

struct ListedObject {
  std::string key;
  uint64_t size = 0;
  std::string etag;  // As the server sent it, quotes removed.
};

struct ListPage {
  std::vector<ListedObject> objects;
  std::vector<std::string> prefixes;  // CommonPrefixes (with a delimiter).
  bool truncated = false;
  std::string next_token;  // NextContinuationToken when truncated.
};

// A ListObjectsV2 response body.
absl::StatusOr<ListPage> ParseListPage(absl::string_view xml);

// The <Code> of an S3 <Error> body ("" when there is none), at most 64
// characters of [A-Za-z0-9.].
std::string S3ErrorCode(absl::string_view xml);

}  // namespace stoker

#endif  // STOKER_SERVER_OBJSTORE_S3_XML_H_
