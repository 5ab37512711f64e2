#include "server/sources/files/list.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "server/sources/source.h"
#include "util/status_macros.h"

namespace stoker {
namespace fs = std::filesystem;

absl::StatusOr<Dataset> LoadListDataset(const std::string& manifest,
                                        const std::string& root,
                                        const ScanLimits& limits) {
  const fs::path base =
      root.empty() ? fs::path(manifest).parent_path() : fs::path(root);
  Dataset ds;
  ds.description = absl::StrCat("list:", manifest);
  ListCharge charge(limits);
  absl::Status s = ParseManifest(
      manifest, limits, kMaxFilesPerSample,
      [&](std::vector<std::string> rel, int32_t label) {
        Sample sample{(base / rel[0]).string(), label, {}};
        for (size_t k = 1; k < rel.size(); ++k) {
          sample.more.push_back((base / rel[k]).string());
        }
        STOKER_RETURN_IF_ERROR(charge.Add(sample));
        ds.files_per_sample = static_cast<uint32_t>(rel.size());
        ds.samples.push_back(std::move(sample));
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  STOKER_RETURN_IF_ERROR(charge.Finish(&ds));
  if (ds.samples.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset manifest ", manifest, " lists no samples"));
  }
  ds.num_classes = NumClasses(ds.samples);
  return ds;
}

namespace {

class ListKind : public SourceKind {
 public:
  v1::DatasetSpec::SourceCase source_case() const override { return v1::DatasetSpec::kList; }
  absl::StatusOr<Dataset> Open(const v1::DatasetSpec& spec,
                               const SourceContext& ctx) const override {
    STOKER_ASSIGN_OR_RETURN(
        Dataset ds, LoadListDataset(spec.list().path(), spec.list().root(), ctx.limits));
    ds.source = ctx.Files();
    return ds;
  }
};

}  // namespace

STOKER_DEFINE_SOURCE(ListSourceKind, ListKind)

}  // namespace stoker
