#include "server/sources/objects/s3.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/sources/objects/s3_folder.h"
#include "server/sources/objects/s3_manifest.h"
#include "server/sources/objects/s3_shards.h"
#include "server/sources/source.h"

namespace stoker {
namespace {

class S3Kind : public SourceKind {
 public:
  v1::DatasetSpec::SourceCase source_case() const override { return v1::DatasetSpec::kS3; }
  absl::StatusOr<Dataset> Open(const v1::DatasetSpec& spec,
                               const SourceContext& ctx) const override {
    absl::StatusOr<S3Url> url = S3Url::Parse(spec.s3().url());
    if (!url.ok()) return url.status();
    if (ctx.objects == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          url->ToString(), ": this daemon reaches no object store (its operator lists the "
                           "endpoints it may reach with --object-store-endpoints)"));
    }
    if (ctx.access == nullptr || ctx.access->credentials == nullptr) {
      return absl::UnauthenticatedError(absl::StrCat(
          url->ToString(), ": the session brought no object store credentials (set "
                           "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, where "
                           "the trainer runs)"));
    }
    ObjectStoreAccess access = *ctx.access;
    access.owner = ctx.uid;  // Its requests take turns with other users'.
    const KeptListing keep{ctx.kept, spec.s3().refresh()};
    const std::vector<std::string> members(spec.s3().members().begin(),
                                           spec.s3().members().end());
    // Shards by pattern: in the spec, or ending the URL.
    std::string pattern = spec.s3().shards();
    const size_t slash = url->key.rfind('/');
    if (pattern.empty() && url->key.find('{', slash == std::string::npos ? 0 : slash) !=
                               std::string::npos) {
      pattern = url->key.substr(slash == std::string::npos ? 0 : slash + 1);
      url->key.resize(slash == std::string::npos ? 0 : slash + 1);
    }
    if (!spec.s3().manifest().empty()) {
      if (!pattern.empty() || IsShardKey(url->key)) {
        return absl::InvalidArgumentError(absl::StrCat(
            url->ToString(), pattern, ": a manifest names the samples below a prefix, not "
            "with shards named too (a pattern, a .tar URL)"));
      }
      return OpenS3Manifest(*url, spec.s3().manifest(), access, ctx.objects, ctx.limits, keep,
                            ctx.read_ahead, members);
    }
    if (!pattern.empty() || IsShardKey(url->key)) {
      return OpenS3Shards(*url, {pattern, nullptr, "", members}, access, ctx.objects, ctx.limits,
                          keep, ctx.read_ahead);
    }
    return OpenS3Folder(*url, access, ctx.objects, ctx.limits, keep, ctx.read_ahead, members);
  }
};

}  // namespace

STOKER_DEFINE_SOURCE(S3SourceKind, S3Kind)

}  // namespace stoker
